-- Every table with a company_id column gets an index that leads with it,
-- and the e-mailed links one by their user: a company's removal
-- (RemoveCompanyStep) deletes a batch from each such table in turn, and the
-- prune of abandoned sign-ups (companiesWithRows) looks in each for the
-- sign-ups' companies, and on these five tables each step read the whole
-- table, every company's rows, even when the company had none left in it.
-- The e-mail outbox keeps a week of mail and webhook_events every pending
-- event's body: a company of 1,000,000 messages removed 1,000 rows a step
-- took 1,000 steps, each of which read the whole outbox before it reached
-- the messages (docs/performance.md, "Removing a company on PostgreSQL").
-- The tables are written once per failure, mail, pairing, SIM setting and
-- webhook event: one more index entry each.
CREATE INDEX device_failures_company ON device_failures (company_id);
CREATE INDEX mail_outbox_company ON mail_outbox (company_id);
CREATE INDEX pairings_company ON pairings (company_id);
CREATE INDEX sim_caps_company ON sim_caps (company_id);
CREATE INDEX webhook_events_company ON webhook_events (company_id);

-- A company's removal and the prune delete their users' e-mailed links by
-- the user id in the record, which nothing indexed.
CREATE INDEX one_time_tokens_user ON one_time_tokens (((rec->>'user_id')::bigint));
