-- Conversations (0006) follow a message moved to another device by the
-- statement that moves it (moveJobs: a failover batch's jobs, its one
-- UPDATE of messages.device_id), summed by conversation in three more
-- statements of its round trip (conversationMoves), not by a row-level
-- trigger: the trigger ran two SQL functions for each job, three
-- statements each time, most of a batch's time (a batch of 256 jobs,
-- some 120 ms, its UPDATE 7; docs/performance.md). A statement-level
-- trigger with transition tables cannot be limited to updates of
-- device_id (0021), so it would have copied the rows of every status
-- change.
--
-- What stays under the trigger's name is a guard: a statement that moves
-- an SMS message to another device without saying that it moves the
-- conversations itself (the transaction's setting
-- simrelay.conversations_moved, 'on') fails, rather than leaving them
-- counted on the device the message left. Its condition is checked where
-- a row's device changes, so the statements that write device_id
-- unchanged (every status change) run no function.
--
-- The rows of conversations stay as they are: nothing is read or
-- rewritten; the swap holds off writes to messages for a moment.
DROP TRIGGER messages_conversation_move ON messages;
DROP FUNCTION messages_conversation();
DROP FUNCTION conversation_add(bigint, bigint, text, bigint);
DROP FUNCTION conversation_remove(bigint, bigint, text);

CREATE FUNCTION messages_conversation_unmoved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'message % moved from device % to device % without its conversation', NEW.id, OLD.device_id, NEW.device_id
		USING HINT = 'a statement that moves messages moves their conversations too (conversationMoves) and sets simrelay.conversations_moved';
END
$$;
CREATE TRIGGER messages_conversation_move BEFORE UPDATE OF device_id ON messages FOR EACH ROW
	WHEN (OLD.device_id <> NEW.device_id AND NEW.channel NOT IN ('whatsapp', 'imessage')
		AND current_setting('simrelay.conversations_moved', true) IS DISTINCT FROM 'on')
	EXECUTE FUNCTION messages_conversation_unmoved();
