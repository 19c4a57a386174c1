-- Limits shared by the nodes of a cluster (windows.go).

-- The API's rate-limit windows (--rate-general, --rate-auth), one row per
-- scope and key (an API key's company, a user, a client address), so that a
-- key is counted once in the cluster, not once per node. A window starts at
-- its key's first request and ends window_end; count saturates at the limit
-- plus one, as the memory windows' does. UNLOGGED: a window lives a minute or
-- a quarter of an hour and is not worth a WAL record per request; after a
-- crash of the database server the windows start afresh, which at worst lets
-- a client make one window's requests again.
CREATE UNLOGGED TABLE rate_windows (
	scope      text        NOT NULL,
	key        text        NOT NULL,
	window_end timestamptz NOT NULL,
	count      integer     NOT NULL,
	PRIMARY KEY (scope, key)
);
-- Pruning deletes the windows that ended.
CREATE INDEX rate_windows_end ON rate_windows (window_end);

-- The console's live views open on every node (streams.go): one lease per
-- open stream, renewed by its node while the stream lives, deleted when it
-- ends, and dead once expires_at passes (a node that died renews nothing).
-- The per-session, per-user and per-company caps count the live leases.
-- UNLOGGED for the same reason as rate_windows: a lease lives a minute.
CREATE UNLOGGED TABLE stream_leases (
	id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	node       text        NOT NULL,
	company_id bigint      NOT NULL,
	user_id    bigint      NOT NULL,
	session    text        NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX stream_leases_company ON stream_leases (company_id, expires_at);
CREATE INDEX stream_leases_node ON stream_leases (node);
