-- A device's messages that have no outcome yet (scheduled, queued, sending):
-- what deleting the device fails, read without the device's whole history.
CREATE INDEX messages_unfinished ON messages (company_id, device_id, id)
	WHERE status IN ('scheduled', 'queued', 'sending');

-- ExpireQueued reads messages_queued_expiry (0005); this one was never used
-- and every insert kept it up.
DROP INDEX messages_expiry;
