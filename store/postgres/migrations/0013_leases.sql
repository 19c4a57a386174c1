-- Leases on the webhook and e-mail outboxes (leases.go): with several
-- nodes each delivery attempt is made by the one node that claimed the row.
-- A claim sets leased_until (the database's clock plus the node's lease)
-- and leased_by (the claiming store's holder name); recording the attempt
-- clears both, or deletes a delivery's row. A lease that ran out (its node died mid-attempt)
-- is claimed again by another node: at least once across a crash.
ALTER TABLE webhook_deliveries ADD COLUMN leased_until timestamptz, ADD COLUMN leased_by text;

-- The e-mail outbox is leased the same way (ClaimMail), one mail at a
-- time: an SMTP attempt takes up to 30 s, a batch would outlast its lease.
ALTER TABLE mail_outbox ADD COLUMN leased_until timestamptz, ADD COLUMN leased_by text;

-- The live leases of each company, counted at every claim so that
-- --webhook-per-company holds across the nodes; few rows are leased at once.
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (company_id) WHERE leased_by IS NOT NULL;
