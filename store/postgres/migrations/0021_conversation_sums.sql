-- Conversations (0006) count the messages an INSERT stored once per
-- statement, not once per row: one statement-level trigger with the
-- statement's new rows (a transition table), summed by conversation, so a
-- bulk send of 1,000 messages to one number updates that conversation's row
-- once, where the row-level trigger updated it 1,000 times in the
-- transaction (each update a new version of the row and of its index
-- entries, which the next one stepped over: the bulk took 3 to 5 times as
-- long as one to 1,000 numbers; docs/performance.md). The rows come out as
-- before: each SMS message (channel neither whatsapp nor imessage) adds 1
-- to its conversation's count, and the conversation's newest is the
-- highest id. Conversations go in key order, so two statements that touch
-- the same ones lock them in the same order.
--
-- A message moved to another device (failover, one row a statement) keeps
-- its row-level trigger (messages_conversation_move): a statement-level
-- trigger with transition tables takes no column list, so it would run,
-- and copy the rows, for every UPDATE of messages (every status change).
CREATE FUNCTION messages_conversations_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO conversations AS c (company_id, device_id, phone, messages, last_id)
	SELECT n.company_id, n.device_id, n.phone, count(*), max(n.id)
	FROM new_rows AS n
	WHERE n.channel NOT IN ('whatsapp', 'imessage')
	GROUP BY n.company_id, n.device_id, n.phone
	ORDER BY n.company_id, n.device_id, n.phone
	ON CONFLICT (company_id, device_id, phone) DO UPDATE SET
		messages = c.messages + EXCLUDED.messages, last_id = greatest(c.last_id, EXCLUDED.last_id);
	RETURN NULL;
END
$$;

DROP TRIGGER messages_conversation_insert ON messages;
CREATE TRIGGER messages_conversation_insert AFTER INSERT ON messages REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION messages_conversations_added();
