-- The bookkeeping every later migration relies on.

-- One row per migration applied, written in the migration's own transaction:
-- the highest version is the schema's.
CREATE TABLE schema_version (
	version    integer     PRIMARY KEY CHECK (version > 0),
	name       text        NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
);

-- Settings of the store as a whole (key, value), e.g. its identity.
CREATE TABLE meta (
	key   text PRIMARY KEY,
	value text NOT NULL
);
