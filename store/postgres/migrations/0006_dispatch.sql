-- Dispatch, reports and inbound: the reads of a device's exchange, and the
-- place every queued job takes.

-- Queue places are drawn from one sequence, under the device row's lock
-- (takePlace): one device's places still rise in the order their
-- transactions commit, and no two jobs anywhere share a place, so
-- MessageSequence (the sequence's last value) is above every place handed
-- out before it, on every device, as the embedded store's ids are.
CREATE SEQUENCE queue_places AS bigint;

-- A device registration's conversations with each number (SMS; WhatsApp
-- and iMessage are read by number): how many messages, and the newest.
-- The triggers below keep it, so every path that stores or moves a message
-- (sends, imports, inbound, failover) counts it without a line of its own.
-- phone sorts bytewise, as the embedded store pages numbers.
CREATE TABLE conversations (
	company_id bigint              NOT NULL,
	device_id  bigint              NOT NULL,
	phone      text COLLATE "C"    NOT NULL,
	messages   bigint              NOT NULL,
	last_id    bigint              NOT NULL,
	PRIMARY KEY (company_id, device_id, phone)
);
CREATE INDEX conversations_latest ON conversations (company_id, device_id, last_id DESC);

CREATE FUNCTION conversation_add(company bigint, device bigint, num text, msg bigint) RETURNS void LANGUAGE sql AS $$
	INSERT INTO conversations AS c (company_id, device_id, phone, messages, last_id) VALUES (company, device, num, 1, msg)
	ON CONFLICT (company_id, device_id, phone) DO UPDATE SET messages = c.messages + 1, last_id = greatest(c.last_id, EXCLUDED.last_id)
$$;

CREATE FUNCTION conversation_remove(company bigint, device bigint, num text) RETURNS void LANGUAGE sql AS $$
	UPDATE conversations SET messages = messages - 1, last_id = coalesce((SELECT max(id) FROM messages
		WHERE company_id = company AND device_id = device AND phone = num AND channel NOT IN ('whatsapp', 'imessage')), 0)
	WHERE company_id = company AND device_id = device AND phone = num;
	DELETE FROM conversations WHERE company_id = company AND device_id = device AND phone = num AND messages <= 0;
$$;

CREATE FUNCTION messages_conversation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'UPDATE' THEN
		PERFORM conversation_remove(OLD.company_id, OLD.device_id, OLD.phone);
	END IF;
	PERFORM conversation_add(NEW.company_id, NEW.device_id, NEW.phone, NEW.id);
	RETURN NULL;
END
$$;

CREATE TRIGGER messages_conversation_insert AFTER INSERT ON messages FOR EACH ROW
	WHEN (NEW.channel NOT IN ('whatsapp', 'imessage'))
	EXECUTE FUNCTION messages_conversation();
-- A job moved to another device (failover) leaves one conversation for another.
CREATE TRIGGER messages_conversation_move AFTER UPDATE OF device_id ON messages FOR EACH ROW
	WHEN (NEW.channel NOT IN ('whatsapp', 'imessage') AND OLD.device_id <> NEW.device_id)
	EXECUTE FUNCTION messages_conversation();

-- A company's messages by id (the export), and its inbound SMS newest
-- first: by company, device and SIM slot, each filter its own index, so a
-- page reads only what it lists.
CREATE INDEX messages_company ON messages (company_id, id);
CREATE INDEX messages_inbound ON messages (company_id, id)
	WHERE direction = 'inbound' AND channel NOT IN ('whatsapp', 'imessage');
CREATE INDEX messages_inbound_slot ON messages (company_id, (rec->>'sim_slot'), id)
	WHERE direction = 'inbound' AND channel NOT IN ('whatsapp', 'imessage');
CREATE INDEX messages_inbound_device ON messages (company_id, device_id, id)
	WHERE direction = 'inbound' AND channel NOT IN ('whatsapp', 'imessage');
CREATE INDEX messages_inbound_device_slot ON messages (company_id, device_id, (rec->>'sim_slot'), id)
	WHERE direction = 'inbound' AND channel NOT IN ('whatsapp', 'imessage');
