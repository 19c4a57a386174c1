-- The send path: the answers kept for idempotency keys, the opt-out lists,
-- and the indexes of the queue's sweeps.

-- The first answer to a send with an Idempotency-Key, per company, route
-- and key. A send claims its key's row first (INSERT ... ON CONFLICT DO
-- NOTHING, then the row's lock): a retry racing it waits for its commit
-- and replays its answer, and a send that is refused rolls its claim back.
-- rec is the store.Idempotent answer; created_at says when it expires.
CREATE TABLE idempotency (
	company_id bigint      NOT NULL,
	route      text        NOT NULL,
	key        text        NOT NULL,
	created_at timestamptz NOT NULL,
	rec        jsonb,
	PRIMARY KEY (company_id, route, key)
);
CREATE INDEX idempotency_created ON idempotency (created_at);

-- The numbers a company must not send SMS to (store.OptOut in rec); phone
-- sorts bytewise, as the list pages.
CREATE TABLE opt_outs (
	company_id bigint           NOT NULL,
	phone      text COLLATE "C" NOT NULL,
	rec        jsonb            NOT NULL,
	PRIMARY KEY (company_id, phone)
);

-- Queued messages by their end, held ones (waiting outside their device's
-- queue for their window) included: the expiry sweep reads only these.
CREATE INDEX messages_queued_expiry ON messages (expires_at, id) WHERE status = 'queued' AND expires_at IS NOT NULL;
