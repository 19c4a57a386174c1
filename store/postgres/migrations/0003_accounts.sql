-- Accounts: who holds an address, sign-in tokens, console sessions and the
-- server's secrets.

-- An address signs in to one account on the whole server, and an account
-- holds its address once it has a password (or was made with it: a signup,
-- CreateUser). A pending invitee does not: its row keeps the address
-- (users.email, lower case) with held false, so it blocks neither a signup
-- nor another company's invitation, and within its company an address is
-- there once. Accepting the invitation sets held, under the same rule.
ALTER TABLE users DROP CONSTRAINT users_email_key;
ALTER TABLE users ADD COLUMN held boolean NOT NULL DEFAULT true;
CREATE UNIQUE INDEX users_email_held ON users (email) WHERE held;
CREATE UNIQUE INDEX users_company_email ON users (company_id, email);

-- A refresh-token family is one login: its tokens descend from the first,
-- each spent once. A revoked family refuses every token of it. Families
-- and tokens outlive their user until pruned, so a deleted user's token
-- is refused as revoked.
CREATE TABLE token_families (
	family  text    PRIMARY KEY,
	user_id bigint  NOT NULL,
	revoked boolean NOT NULL,
	rec     jsonb   NOT NULL
);
CREATE INDEX token_families_user ON token_families (user_id);

-- Refresh tokens by the hash of their value; used_at is set when spent.
CREATE TABLE refresh_tokens (
	hash       bytea       PRIMARY KEY,
	family     text        NOT NULL REFERENCES token_families (family),
	expires_at timestamptz NOT NULL,
	rec        jsonb       NOT NULL
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family);
CREATE INDEX refresh_tokens_expiry ON refresh_tokens (expires_at);

-- E-mailed verification, reset and invitation tokens, by hash; single use.
CREATE TABLE one_time_tokens (
	hash       bytea       PRIMARY KEY,
	expires_at timestamptz NOT NULL,
	rec        jsonb       NOT NULL
);
CREATE INDEX one_time_tokens_expiry ON one_time_tokens (expires_at);

-- Signed-in browsers, by the hash of the cookie's id. seen_at and
-- expires_at are the record's, for pruning.
CREATE TABLE console_sessions (
	hash       bytea       PRIMARY KEY,
	user_id    bigint      NOT NULL,
	seen_at    timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	rec        jsonb       NOT NULL
);
CREATE INDEX console_sessions_user ON console_sessions (user_id);
CREATE INDEX console_sessions_seen ON console_sessions (seen_at);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

-- The server's secrets (the JWT key, the API key seal), made once by
-- whichever node asks first and the same for every node after.
CREATE TABLE secrets (
	name  text  PRIMARY KEY,
	value bytea NOT NULL
);
