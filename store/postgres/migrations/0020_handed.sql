-- The queued WhatsApp and iMessage sends by the registration they were last
-- handed to (the record's handed_to): an agent's hello releases the ones it
-- does not name (AgentRelease, agents_messages.go) and reads them through
-- this index, a few rows per agent, where it read the company's whole queue
-- of agent sends (messages_number_queue) on every agent hello. A send
-- enters it at its hand-out and leaves it when it is released, taken,
-- reported or expired (it leaves the queue, or its handed_to goes).
CREATE INDEX messages_handed ON messages (company_id, ((rec->>'handed_to')::bigint))
	WHERE number_id IS NOT NULL AND status = 'queued' AND rec ? 'handed_to';
