-- The pending deliveries by company and entry, each entry's oldest due
-- first: the dispatcher's pass reads each entry's due deliveries through
-- it and merges them oldest due first, so a company (or an entry) at its
-- bound of attempts under way costs the pass one probe per entry, not a
-- step over each of its due rows (scanDue, webhook_deliveries.go). Every
-- row of the outbox is pending (a delivery's row goes when it ends).
CREATE INDEX webhook_deliveries_entry_due ON webhook_deliveries (company_id, webhook_id, next_attempt_at, id);
