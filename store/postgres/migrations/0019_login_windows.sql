-- The windows of the failed logins (scopes login, login-client and
-- login-device: an e-mail address's, a client's share of it, a device
-- cookie's) and of the reset mails (reset-mail), moved out of the UNLOGGED
-- rate_windows (migration 0012) into a table of their own that is logged:
-- PostgreSQL empties an unlogged table when it recovers from a crash, and a
-- standby promoted in a failover has it empty, which gave every address
-- its guesses afresh. These are written per login try and per reset mail,
-- not per API request, so their WAL costs little; the API's windows stay
-- in rate_windows. Same columns, index and sweep (windows.go picks the
-- table by scope).
CREATE TABLE login_windows (
	scope      text        NOT NULL,
	key        text        NOT NULL,
	window_end timestamptz NOT NULL,
	count      integer     NOT NULL,
	PRIMARY KEY (scope, key)
);
-- Pruning deletes the windows that ended.
CREATE INDEX login_windows_end ON login_windows (window_end);

-- The counts of windows still open move with their rows.
INSERT INTO login_windows (scope, key, window_end, count)
	SELECT scope, key, window_end, count FROM rate_windows
	WHERE scope IN ('login', 'login-client', 'login-device', 'reset-mail');
DELETE FROM rate_windows WHERE scope IN ('login', 'login-client', 'login-device', 'reset-mail');
