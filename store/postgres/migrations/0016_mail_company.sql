-- The company whose e-mail webhook entry a mail delivers (0: the server's
-- own account mail), and the bytes its bound counts (store.MailSize), so
-- that a company's pending mails are counted by an index of their own
-- (store.MailLimits). Rows written before have neither: account mails.
ALTER TABLE mail_outbox ADD COLUMN company_id bigint NOT NULL DEFAULT 0, ADD COLUMN size bigint NOT NULL DEFAULT 0;
CREATE INDEX mail_outbox_company_pending ON mail_outbox (company_id) WHERE state = 'pending' AND company_id <> 0;
