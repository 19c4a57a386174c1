package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// A device with more unfinished messages than a transaction of its
// deletion fails is deleted: its messages are failed a batch at a time,
// each batch holding its own messages only, so a writer of another of them
// goes on while a batch is open (the deletion locked them all in its first
// statement, and a queue of millions ran past the store's deadline).
// Another company's deletion of it touches nothing, and once deleted it is
// gone.
func TestDeviceDeletionFailsItsQueueInBatches(t *testing.T) {
	t.Parallel()
	tr := newPauseTracer("UPDATE messages SET status = u.status, queue_place = u.place") // the batch's messages written
	s := openStore(t, Options{Tracer: tr})
	s.deviceBatch = 3
	ctx := context.Background()
	c, _ := conformance.Company(t, s)
	other, _ := conformance.Company(t, s)
	fp := devicesOf(t, s, c.ID, 1)[0]
	const queued = 10
	var last store.Message
	for i := range queued {
		m := store.Message{UUID: fmt.Sprint("q-", i), CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms",
			Phone: "+15550100000", Text: "hi"}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		last = got
	}
	failed := func() int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM messages WHERE device_id = $1 AND status = 'failed' AND rec->>'error' = 'device_deleted'",
			id(last.DeviceID)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := s.DeleteDevice(other.ID, fp, conformance.T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another company's deletion of the device: %v, want store.ErrNotFound", err)
	}
	if n := failed(); n != 0 {
		t.Fatalf("another company's deletion failed %d messages of the device", n)
	}

	type result struct {
		d   store.Device
		err error
	}
	deleted := make(chan result, 1)
	go func() {
		d, err := s.DeleteDevice(c.ID, fp, conformance.T0.Add(time.Minute))
		deleted <- result{d, err}
	}()
	select {
	case <-tr.paused:
	case r := <-deleted:
		t.Fatalf("the deletion ended (%v) without failing a message", r.err)
	case <-time.After(time.Minute):
		t.Fatal("the deletion did not fail a message in a minute")
	}
	// The first batch holds the 3 oldest; the newest is free.
	_, err := s.pool.Exec(ctx, "SELECT id FROM messages WHERE id = $1 FOR UPDATE NOWAIT", id(last.ID))
	close(tr.resume)
	if err != nil {
		t.Errorf("the device's newest message while the deletion's first batch was open: %v", err)
	}
	r := <-deleted
	if r.err != nil || r.d.Fingerprint != fp {
		t.Fatalf("DeleteDevice: %+v (%v)", r.d, r.err)
	}
	if n := failed(); n != queued {
		t.Errorf("%d messages failed with device_deleted, want %d", n, queued)
	}
	if _, err := s.DeleteDevice(c.ID, fp, conformance.T0.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted device deleted again: %v, want store.ErrNotFound", err)
	}
}

// A pool with more sticky entries than a batch is deleted, its entries a
// batch at a time before the pool (the cascade of the pool's delete held
// them all in one transaction); another company's deletion of it deletes
// nothing.
func TestPoolDeletionDeletesItsStickyEntriesInBatches(t *testing.T) {
	t.Parallel()
	// The deletion's batches begin so.
	tr := newPauseTracer("WITH c AS MATERIALIZED (SELECT ctid FROM pool_sticky")
	tr.off.Store(true) // until the deletion watched
	s := openStore(t, Options{Tracer: tr})
	s.pruneBatch = 2
	ctx := context.Background()
	c, _ := conformance.Company(t, s)
	other, _ := conformance.Company(t, s)
	var poolID int64
	if err := s.pool.QueryRow(ctx, `INSERT INTO pools (company_id, name_key, rec) VALUES ($1, 'p', '{"name": "p"}') RETURNING id`, id(c.ID)).Scan(&poolID); err != nil {
		t.Fatal(err)
	}
	const sticky = 7
	for i := range sticky {
		if _, err := s.pool.Exec(ctx, "INSERT INTO pool_sticky (pool_id, phone, device_id, sim_slot, written_at) VALUES ($1, $2, 1, 'SIM1', $3)",
			poolID, fmt.Sprint("+1555010000", i), conformance.T0); err != nil {
			t.Fatal(err)
		}
	}
	left := func(lock string) int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM pool_sticky WHERE pool_id = $1 "+lock+") r", poolID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := s.DeletePool(other.ID, uint64(poolID)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another company's deletion of the pool: %v, want store.ErrNotFound", err)
	}
	if n := left(""); n != sticky {
		t.Fatalf("another company's deletion of the pool left %d sticky entries of %d", n, sticky)
	}
	type result struct {
		p   store.Pool
		err error
	}
	deleted := make(chan result, 1)
	tr.off.Store(false)
	go func() {
		p, err := s.DeletePool(c.ID, uint64(poolID))
		deleted <- result{p, err}
	}()
	select {
	case <-tr.paused:
	case r := <-deleted:
		t.Fatalf("the deletion ended (%v) without deleting", r.err)
	case <-time.After(time.Minute):
		t.Fatal("the deletion did not delete in a minute")
	}
	free := left("FOR UPDATE SKIP LOCKED") // the entries no open batch holds
	close(tr.resume)
	if free != sticky-2 {
		t.Errorf("%d of %d sticky entries free while the deletion's first batch was open, want all but the batch's 2", free, sticky)
	}
	if r := <-deleted; r.err != nil || r.p.Name != "p" {
		t.Fatalf("DeletePool: %+v (%v)", r.p, r.err)
	}
	if n := left(""); n != 0 {
		t.Errorf("%d sticky entries left after the pool's deletion", n)
	}
}

// A pool's deletion ends while sends through the pool write sticky
// entries between its batches: the batches end at one that found fewer
// entries than a batch deletes, and the pool's delete takes what the sends
// wrote since. Here every batch is followed by a send's entry (a trigger),
// as under steady traffic; before, the batches ended only at one that
// deleted nothing, which never came while the sends went on (the trigger
// stops after 1,000).
func TestPoolDeletionEndsUnderSends(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	s.pruneBatch = 2
	ctx := context.Background()
	c, _ := conformance.Company(t, s)
	var poolID int64
	if err := s.pool.QueryRow(ctx, `INSERT INTO pools (company_id, name_key, rec) VALUES ($1, 'p', '{"name": "p"}') RETURNING id`, id(c.ID)).Scan(&poolID); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if _, err := s.pool.Exec(ctx, "INSERT INTO pool_sticky (pool_id, phone, device_id, sim_slot, written_at) VALUES ($1, $2, 1, 'SIM1', $3)",
			poolID, fmt.Sprint("+1555010000", i), conformance.T0); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		"CREATE TABLE sends_made (n int NOT NULL)",
		"INSERT INTO sends_made VALUES (0)",
		fmt.Sprintf(`CREATE FUNCTION send_through_pool() RETURNS trigger LANGUAGE plpgsql AS $$
			DECLARE k int;
			BEGIN
				UPDATE sends_made SET n = n + 1 RETURNING n INTO k;
				IF k <= 1000 THEN
					INSERT INTO pool_sticky (pool_id, phone, device_id, sim_slot, written_at)
						SELECT id, '+1666' || k, 1, 'SIM1', now() FROM pools WHERE id = %d;
				END IF;
				RETURN NULL;
			END $$`, poolID),
		"CREATE TRIGGER send_through_pool AFTER DELETE ON pool_sticky FOR EACH STATEMENT EXECUTE FUNCTION send_through_pool()",
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if p, err := s.DeletePool(c.ID, uint64(poolID)); err != nil || p.Name != "p" {
		t.Fatalf("DeletePool: %+v (%v)", p, err)
	}
	var batches, left int
	if err := s.pool.QueryRow(ctx, "SELECT n, (SELECT count(*) FROM pool_sticky) FROM sends_made").Scan(&batches, &left); err != nil {
		t.Fatal(err)
	}
	if batches > 20 {
		t.Errorf("the deletion of a pool of 7 sticky entries ran %d batches while sends went on, want it to end once few are left", batches)
	}
	if left != 0 {
		t.Errorf("%d sticky entries left after the pool's deletion", left)
	}
}

// A deletion that fails after some of its batches leaves the device live,
// with those batches' messages failed (device_deleted) and counted, and
// its last failures as its own sends left them: no failure of a message it
// never tried, as the embedded store's deletion, one transaction, leaves
// nothing when it fails.
func TestInterruptedDeviceDeletionLeavesItsFailures(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	s.deviceBatch = 2
	ctx := context.Background()
	c, _ := conformance.Company(t, s)
	fp := devicesOf(t, s, c.ID, 1)[0]
	var last store.Message
	for i := range 5 {
		m := store.Message{UUID: fmt.Sprint("i-", i), CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms",
			Phone: "+15550100000", Text: "hi"}
		got, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		last = got
	}
	// The deletion's first batch, and then the database went away.
	var n int
	if err := s.write("delete device", func(t *txn) error {
		var err error
		n, err = s.failDeviceBatch(t, c.ID, fp, conformance.T0.Add(time.Minute))
		return err
	}); err != nil || n != 2 {
		t.Fatalf("failDeviceBatch: %d (%v), want 2", n, err)
	}
	var failed int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM messages WHERE device_id = $1 AND status = 'failed' AND rec->>'error' = 'device_deleted'",
		id(last.DeviceID)).Scan(&failed); err != nil {
		t.Fatal(err)
	}
	if failed != 2 {
		t.Errorf("%d messages failed with device_deleted after one batch, want 2", failed)
	}
	if _, err := s.Device(fp); err != nil {
		t.Fatalf("the device after an interrupted deletion: %v, want it live", err)
	}
	fs, err := s.DeviceFailures(c.ID, last.DeviceID)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 0 {
		t.Errorf("the live device's last failures after an interrupted deletion: %+v, want none", fs)
	}
}

// A device whose SIMs sent to more recipients than a batch deletes is
// deleted: its SIMs' recipients are deleted a batch at a time after the
// device (the transaction that deletes it deleted them all, holding every
// row), each batch holding its own rows only; another company's deletion
// of it deletes none.
func TestDeviceDeletionDeletesItsSIMRecipientsInBatches(t *testing.T) {
	t.Parallel()
	// The deletion's batches begin so.
	tr := newPauseTracer("WITH c AS MATERIALIZED (SELECT ctid FROM sim_recipients")
	s := openStore(t, Options{Tracer: tr})
	s.pruneBatch = 2
	ctx := context.Background()
	c, _ := conformance.Company(t, s)
	other, _ := conformance.Company(t, s)
	fp := devicesOf(t, s, c.ID, 1)[0]
	var devID int64
	if err := s.pool.QueryRow(ctx, "SELECT id FROM devices WHERE company_id = $1 AND fingerprint = $2", id(c.ID), fp).Scan(&devID); err != nil {
		t.Fatal(err)
	}
	const recipients = 7
	for i := range recipients {
		if _, err := s.pool.Exec(ctx, "INSERT INTO sim_recipients (device_id, sim_slot, day, phone) VALUES ($1, 'SIM1', 20260101, $2)",
			devID, fmt.Sprint("+1555010000", i)); err != nil {
			t.Fatal(err)
		}
	}
	left := func(lock string) int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM sim_recipients WHERE device_id = $1 "+lock+") r", devID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := s.DeleteDevice(other.ID, fp, conformance.T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another company's deletion of the device: %v, want store.ErrNotFound", err)
	}
	if n := left(""); n != recipients {
		t.Fatalf("another company's deletion of the device left %d recipients of %d", n, recipients)
	}
	type result struct {
		d   store.Device
		err error
	}
	deleted := make(chan result, 1)
	go func() {
		d, err := s.DeleteDevice(c.ID, fp, conformance.T0)
		deleted <- result{d, err}
	}()
	select {
	case <-tr.paused:
	case r := <-deleted:
		t.Fatalf("the deletion ended (%v) without deleting recipients in a batch", r.err)
	case <-time.After(time.Minute):
		t.Fatal("the deletion did not delete in a minute")
	}
	free := left("FOR UPDATE SKIP LOCKED") // the rows no open batch holds
	close(tr.resume)
	if free != recipients-2 {
		t.Errorf("%d of %d recipients free while the deletion's first batch was open, want all but the batch's 2", free, recipients)
	}
	if r := <-deleted; r.err != nil || r.d.Fingerprint != fp {
		t.Fatalf("DeleteDevice: %+v (%v)", r.d, r.err)
	}
	if n := left(""); n != 0 {
		t.Errorf("%d recipients left after the device's deletion", n)
	}
}

// A deletion that fails leaves its SIMs' recipients of the day as they
// were: a recipient the SIM sent to before still gets its sends at the
// recipients cap, and a new one is still refused there (the deletion
// deleted them in batches while the device was live, and one that failed
// after those left the day's recipients unknown, so a known recipient was
// refused at the cap, or counted again under it). The deletion made again
// deletes them all.
func TestFailedDeviceDeletionKeepsItsSIMRecipients(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	s.pruneBatch = 1
	ctx := context.Background()
	c, _ := conformance.Company(t, s)
	fp := devicesOf(t, s, c.ID, 1)[0]
	if _, err := s.SetSIMCaps(c.ID, fp, map[string]store.SIMCaps{"SIM1": {RecipientsPerDay: 2}}, conformance.T0); err != nil {
		t.Fatal(err)
	}
	send := func(to string) error {
		t.Helper()
		m := store.Message{UUID: "r-" + to + fmt.Sprint(time.Now().UnixNano()), CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms", Phone: to, Text: "hi"}
		_, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil)
		return err
	}
	for _, to := range []string{"+15550100001", "+15550100002"} {
		if err := send(to); err != nil {
			t.Fatalf("send to %s: %v", to, err)
		}
	}
	// The database refuses the transaction that deletes the device.
	if _, err := s.pool.Exec(ctx, `CREATE FUNCTION refuse_deletion() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'deletion refused'; END $$;
		CREATE TRIGGER refuse_deletion BEFORE UPDATE OF deleted_at ON devices
			FOR EACH ROW WHEN (NEW.deleted_at IS NOT NULL) EXECUTE FUNCTION refuse_deletion()`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteDevice(c.ID, fp, conformance.T0.Add(time.Minute)); err == nil {
		t.Fatal("DeleteDevice succeeded under a database that refuses it")
	}
	if _, err := s.Device(fp); err != nil {
		t.Fatalf("the device after a failed deletion: %v, want it live", err)
	}
	if err := send("+15550100001"); err != nil {
		t.Errorf("a known recipient at the cap after a failed deletion: %v", err)
	}
	var capped *store.SIMCappedError
	if err := send("+15550100003"); !errors.As(err, &capped) || capped.What != store.CapRecipientsPerDay {
		t.Errorf("a third recipient after a failed deletion: %v, want the recipients_per_day cap", err)
	}
	if us, err := s.SIMUsages(c.ID, fp, conformance.T0); err != nil || us[0].Recipients != 2 {
		t.Errorf("usage after a failed deletion: %+v (%v), want 2 recipients", us, err)
	}
	if _, err := s.pool.Exec(ctx, "DROP TRIGGER refuse_deletion ON devices"); err != nil {
		t.Fatal(err)
	}
	d, err := s.DeleteDevice(c.ID, fp, conformance.T0.Add(time.Minute))
	if err != nil {
		t.Fatalf("the deletion made again: %v", err)
	}
	var left int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM sim_recipients WHERE device_id = $1", id(d.ID)).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d recipients left after the device's deletion", left)
	}
}

// A deletion whose batches of SIM recipients fail after the device's own
// transaction committed answers the device deleted (it is: a retry would
// be 404): the rows left are of an id no send reads, and the prune of the
// SIM counts deletes them once their day has passed.
func TestDeviceDeletionWithFailedRecipientBatches(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	ctx := context.Background()
	c, _ := conformance.Company(t, s)
	fp := devicesOf(t, s, c.ID, 1)[0]
	if _, err := s.SetSIMCaps(c.ID, fp, map[string]store.SIMCaps{"SIM1": {RecipientsPerDay: 5}}, conformance.T0); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m := store.Message{UUID: fmt.Sprint("fr-", i), CompanyID: c.ID, Device: fp, SIMSlot: "SIM1", Channel: "sms", Phone: fmt.Sprint("+1555010000", i), Text: "hi"}
		if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return conformance.T0 }, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The database refuses every deletion of a recipient.
	if _, err := s.pool.Exec(ctx, `CREATE FUNCTION refuse_recipients() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'deletion refused'; END $$;
		CREATE TRIGGER refuse_recipients BEFORE DELETE ON sim_recipients
			FOR EACH ROW EXECUTE FUNCTION refuse_recipients()`); err != nil {
		t.Fatal(err)
	}
	d, err := s.DeleteDevice(c.ID, fp, conformance.T0.Add(time.Minute))
	if err != nil || d.Fingerprint != fp {
		t.Fatalf("DeleteDevice with its recipients' batches failing: %+v (%v), want the device deleted", d, err)
	}
	if _, err := s.Device(fp); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the device after its deletion: %v, want ErrNotFound", err)
	}
	left := func() int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM sim_recipients WHERE device_id = $1", id(d.ID)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := left(); n != 3 {
		t.Fatalf("%d recipients left by the failed batches, want 3", n)
	}
	if _, err := s.pool.Exec(ctx, "DROP TRIGGER refuse_recipients ON sim_recipients"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PruneSIMCounts(conformance.T0.AddDate(0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if n := left(); n != 0 {
		t.Errorf("%d recipients of the deleted device left after the next day's prune", n)
	}
}
