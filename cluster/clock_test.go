package cluster

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/postgres"
)

// within fails t unless got is within d of want.
func within(t *testing.T, what string, got, want time.Time, d time.Duration) {
	t.Helper()
	if diff := got.Sub(want); diff < -d || diff > d {
		t.Errorf("%s: got %s, want within %s of %s (off by %s)", what, got.Format(time.RFC3339Nano), d, want.Format(time.RFC3339Nano), diff)
	}
}

// A node whose clock is minutes off reads the database's time from its
// first reading on; a reading within the tolerance, a failed one and a slow
// one change nothing.
func TestClockFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	st, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	for _, skew := range []time.Duration{5 * time.Minute, -5 * time.Minute} {
		c := NewClock(func() time.Time { return time.Now().Add(skew) }, nil)
		if err := c.Measure(st.DatabaseTime); err != nil {
			t.Fatal(err)
		}
		db, err := st.DatabaseTime()
		if err != nil {
			t.Fatal(err)
		}
		within(t, "a clock "+skew.String()+" off, once measured", c.Now(), db, time.Second)
	}

	// The database's own time, a moment ago and later (a test clock), as
	// read: the node's clock agrees with it within the tolerance.
	local := testclock.New(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	c := NewClock(local.Now, nil)
	at := local.Now().Add(ClockTolerance / 2)
	if err := c.Measure(func() (time.Time, error) { return at, nil }); err != nil || c.Offset() != 0 {
		t.Errorf("a reading within the tolerance: offset %s, err %v; want 0, nil", c.Offset(), err)
	}
	at = local.Now().Add(time.Hour)
	if err := c.Measure(func() (time.Time, error) { return at, nil }); err != nil || c.Offset() != time.Hour {
		t.Errorf("a reading an hour ahead: offset %s, err %v; want 1h, nil", c.Offset(), err)
	}
	down := errors.New("down")
	if err := c.Measure(func() (time.Time, error) { return time.Time{}, down }); !errors.Is(err, down) || c.Offset() != time.Hour {
		t.Errorf("a failed reading: offset %s, err %v; want 1h, %v", c.Offset(), err, down)
	}
	slow := func() (time.Time, error) {
		local.Advance(2 * clockMaxTrip)
		return local.Now(), nil // the node's own time, after a slow trip
	}
	if err := c.Measure(slow); err != nil || c.Offset() != time.Hour {
		t.Errorf("a slow reading: offset %s, err %v; want 1h, nil", c.Offset(), err)
	}
	at = local.Now()
	if err := c.Measure(func() (time.Time, error) { return at, nil }); err != nil || c.Offset() != 0 {
		t.Errorf("a reading that agrees again: offset %s, err %v; want 0, nil", c.Offset(), err)
	}
}

// Three nodes on one database, one with a clock 5 minutes ahead and one 5
// minutes behind, each on its Clock: the one ahead releases no scheduled
// send early and expires no queued send early, and the one behind stamps
// a send's end from the database's time, so the others do not expire it
// early. On their own clocks (as nodes ran before Clock), the node ahead
// released a send scheduled 2 minutes ahead at once and expired a send
// with 3 minutes to live, and a send with 3 minutes to live accepted by
// the node behind was expired at once by the others: answered 2xx, never
// at its phone.
func TestSkewedNodesKeepTheSchedule(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	open := func() *postgres.Store {
		st, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	onTime, ahead, behind := open(), open(), open()
	co := store.Company{Name: "Acme", APIKeyHash: []byte("key of Acme")}
	if err := onTime.CreateCompany(&co, &store.User{Email: "a@acme.test", PasswordHash: "x", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	dev := store.Device{Fingerprint: "pixel-1", CompanyID: co.ID, Name: "P", Status: store.DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("t"), CreatedAt: time.Now()}
	if err := onTime.ProvisionDevices([]store.Device{dev}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	node := func(st *postgres.Store, skew time.Duration) *sms.Service {
		c := NewClock(func() time.Time { return time.Now().Add(skew) }, nil)
		if err := c.Measure(st.DatabaseTime); err != nil {
			t.Fatal(err)
		}
		return sms.New(sms.Config{}, st, log, c.Now)
	}
	a, b, c := node(onTime, 0), node(ahead, 5*time.Minute), node(behind, -5*time.Minute)
	ctx := context.Background()
	send := func(svc *sms.Service, text string, in sms.SendInput) store.Message {
		t.Helper()
		in.CompanyID, in.Device, in.Phone, in.Message, in.SIMSlot = co.ID, dev.Fingerprint, "+15550100000", text, "SIM1"
		m, _, err := svc.Send(ctx, in, nil)
		if err != nil {
			t.Fatalf("send %q: %v", text, err)
		}
		return m
	}
	three := int64(180)
	scheduled := send(a, "scheduled in 2 minutes", sms.SendInput{SendAt: time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)})
	short := send(a, "3 minutes to live, on the node on time", sms.SendInput{Validity: &three})
	late := send(c, "3 minutes to live, on the node behind", sms.SendInput{Validity: &three})
	within(t, "the end of a send accepted by the node behind", late.ExpiresAt, time.Now().Add(3*time.Minute), time.Minute)

	b.ReleaseDue()
	b.Expire()
	a.Expire()
	for _, want := range []struct {
		m      store.Message
		status string
	}{{scheduled, store.MsgScheduled}, {short, store.MsgQueued}, {late, store.MsgQueued}} {
		got, err := onTime.MessageByUUID(co.ID, want.m.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != want.status {
			t.Errorf("%q after the sweeps of the nodes ahead and on time: got %s, want %s", got.Text, got.Status, want.status)
		}
	}
}
