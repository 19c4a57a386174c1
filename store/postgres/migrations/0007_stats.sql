-- Sums of the message counters (stats_days) that the dashboard and the
-- analytics read, so that an answer reads a few rows a day, whatever the
-- number of devices, users and shards behind it (store/postgres/stats.go):
--
--   stats_company_days: by company and UTC day, for the all-time totals, a
--     period's segments and the series of a question with no sums by device;
--   stats_device_days: by company, day and device registration, for the
--     sums by device of a question with no filter.
--
-- A trigger on stats_days keeps them, in the transaction that counts, so a
-- sum never disagrees with its counters, whoever writes them (the store's
-- count, a copy of an embedded store). A company's day is split in 8 rows as
-- its counters are; each transaction adds to one of them (its id modulo 8),
-- so the counts of one transaction (a deleted device failing its queue)
-- lock one row, never several in an order another transaction may reverse.
-- A device's day is one row: the sends to one device queue on its device
-- row anyway, and its link reports one at a time.

CREATE TABLE stats_company_days (
	company_id bigint   NOT NULL,
	day        integer  NOT NULL,
	shard      smallint NOT NULL,
	sent       bigint   NOT NULL DEFAULT 0,
	delivered  bigint   NOT NULL DEFAULT 0,
	failed     bigint   NOT NULL DEFAULT 0,
	received   bigint   NOT NULL DEFAULT 0,
	expired    bigint   NOT NULL DEFAULT 0,
	segments   bigint   NOT NULL DEFAULT 0,
	PRIMARY KEY (company_id, day, shard)
);

CREATE TABLE stats_device_days (
	company_id bigint  NOT NULL,
	day        integer NOT NULL,
	device_id  bigint  NOT NULL,
	sent       bigint  NOT NULL DEFAULT 0,
	delivered  bigint  NOT NULL DEFAULT 0,
	failed     bigint  NOT NULL DEFAULT 0,
	received   bigint  NOT NULL DEFAULT 0,
	expired    bigint  NOT NULL DEFAULT 0,
	segments   bigint  NOT NULL DEFAULT 0,
	PRIMARY KEY (company_id, day, device_id)
);

-- stats_sums_add adds a change of one stats_days row (its new counts less
-- its old ones; a removed row's counts negated) to the sums of its company's
-- day and its device's day.
CREATE FUNCTION stats_sums_add(company bigint, d integer, device bigint,
	dsent bigint, ddelivered bigint, dfailed bigint, dreceived bigint, dexpired bigint, dsegments bigint)
RETURNS void LANGUAGE sql AS $$
	INSERT INTO stats_company_days AS s (company_id, day, shard, sent, delivered, failed, received, expired, segments)
	VALUES (company, d, (pg_current_xact_id()::text::bigint % 8)::smallint, dsent, ddelivered, dfailed, dreceived, dexpired, dsegments)
	ON CONFLICT (company_id, day, shard) DO UPDATE SET
		sent = s.sent + EXCLUDED.sent, delivered = s.delivered + EXCLUDED.delivered, failed = s.failed + EXCLUDED.failed,
		received = s.received + EXCLUDED.received, expired = s.expired + EXCLUDED.expired, segments = s.segments + EXCLUDED.segments;
	INSERT INTO stats_device_days AS s (company_id, day, device_id, sent, delivered, failed, received, expired, segments)
	VALUES (company, d, device, dsent, ddelivered, dfailed, dreceived, dexpired, dsegments)
	ON CONFLICT (company_id, day, device_id) DO UPDATE SET
		sent = s.sent + EXCLUDED.sent, delivered = s.delivered + EXCLUDED.delivered, failed = s.failed + EXCLUDED.failed,
		received = s.received + EXCLUDED.received, expired = s.expired + EXCLUDED.expired, segments = s.segments + EXCLUDED.segments;
$$;

CREATE FUNCTION stats_days_summed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'UPDATE' AND (NEW.company_id, NEW.day, NEW.device_id) = (OLD.company_id, OLD.day, OLD.device_id) THEN
		PERFORM stats_sums_add(NEW.company_id, NEW.day, NEW.device_id, NEW.sent - OLD.sent, NEW.delivered - OLD.delivered,
			NEW.failed - OLD.failed, NEW.received - OLD.received, NEW.expired - OLD.expired, NEW.segments - OLD.segments);
		RETURN NULL;
	END IF;
	IF TG_OP IN ('UPDATE', 'DELETE') THEN
		PERFORM stats_sums_add(OLD.company_id, OLD.day, OLD.device_id, -OLD.sent, -OLD.delivered,
			-OLD.failed, -OLD.received, -OLD.expired, -OLD.segments);
	END IF;
	IF TG_OP IN ('UPDATE', 'INSERT') THEN
		PERFORM stats_sums_add(NEW.company_id, NEW.day, NEW.device_id, NEW.sent, NEW.delivered,
			NEW.failed, NEW.received, NEW.expired, NEW.segments);
	END IF;
	RETURN NULL;
END
$$;

CREATE TRIGGER stats_days_summed AFTER INSERT OR DELETE ON stats_days
	FOR EACH ROW EXECUTE FUNCTION stats_days_summed();
CREATE TRIGGER stats_days_changed AFTER UPDATE ON stats_days
	FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION stats_days_summed();

-- Counters written before this migration.
INSERT INTO stats_company_days (company_id, day, shard, sent, delivered, failed, received, expired, segments)
SELECT company_id, day, 0, sum(sent), sum(delivered), sum(failed), sum(received), sum(expired), sum(segments)
FROM stats_days GROUP BY company_id, day;
INSERT INTO stats_device_days (company_id, day, device_id, sent, delivered, failed, received, expired, segments)
SELECT company_id, day, device_id, sum(sent), sum(delivered), sum(failed), sum(received), sum(expired), sum(segments)
FROM stats_days GROUP BY company_id, day, device_id;
