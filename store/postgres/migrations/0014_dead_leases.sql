-- Every node ends the leases of nodes that are gone after each of its beats
-- (EndDeadLeases, every 2 s): the mail outbox keeps sent mail for a week, so
-- the few leased rows are found by an index rather than a scan of it all.
-- (The webhook deliveries have theirs: webhook_deliveries_leased, 0013.)
CREATE INDEX mail_outbox_leased ON mail_outbox (leased_by) WHERE leased_by IS NOT NULL;
