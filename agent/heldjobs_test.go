package agent

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// TestHeldJobsNameWhatTheServerMayStillHandOut: a hello names every
// WhatsApp and iMessage job of the journal with no report of it
// acknowledged, in whatever state (taken, sent and waiting for its
// delivery report, done with its report unanswered or refused), so that
// the server never gives another agent a job this one may carry out or
// report. A job whose report the server acknowledged (it is settled
// there), and SMS jobs (no agent holds them), are left out; the list is
// empty, not absent, when there is none; more than the bound says nothing.
func TestHeldJobsNameWhatTheServerMayStillHandOut(t *testing.T) {
	t.Parallel()
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	now := time.Now()
	held := func() []string {
		t.Helper()
		ids, ok, err := j.HeldJobs(proto.MaxHelloJobs)
		if err != nil || !ok {
			t.Fatalf("held jobs: %v %v", ok, err)
		}
		slices.Sort(ids)
		return ids
	}
	if ids := held(); ids == nil || len(ids) != 0 {
		t.Fatalf("an empty journal holds %#v, want an empty list", ids)
	}
	take := func(id, channel string) {
		t.Helper()
		if _, err := j.Take(proto.Send{ID: id, Channel: channel, To: "+15551234567", ExpiresAt: stamp(now.Add(time.Hour))}, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"wa-taken", "wa-awaiting", "wa-unanswered", "wa-refused", "wa-acked", "wa-acked-awaiting"} {
		take(id, proto.ChannelWhatsApp)
	}
	take("im-taken", proto.ChannelIMessage)
	take("sms-taken", proto.ChannelSMS)
	sent := func(id string) proto.Status { return proto.Status{ID: id, Status: proto.StatusSent, At: stamp(now)} }
	for _, c := range []struct {
		id       string
		awaiting bool
	}{{"wa-awaiting", true}, {"wa-unanswered", false}, {"wa-refused", false}, {"wa-acked", false}, {"wa-acked-awaiting", true}} {
		if err := j.Finish(c.id, sent(c.id), "", c.awaiting, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.DropReport("wa-refused", proto.StatusSent, ""); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"wa-acked", "wa-acked-awaiting"} {
		if ok, err := j.AckReport(id, proto.StatusSent, ""); err != nil || !ok {
			t.Fatalf("status_ack of %s: %v %v", id, ok, err)
		}
	}
	want := []string{"im-taken", "wa-awaiting", "wa-refused", "wa-taken", "wa-unanswered"}
	if ids := held(); !slices.Equal(ids, want) {
		t.Fatalf("held jobs %v, want %v", ids, want)
	}
	// The delivery report of a job settled on the server keeps it out.
	if err := j.Finish("wa-acked-awaiting", proto.Status{ID: "wa-acked-awaiting", Status: proto.StatusDelivered, At: stamp(now)}, "", false, now); err != nil {
		t.Fatal(err)
	}
	if ids := held(); !slices.Equal(ids, want) {
		t.Fatalf("held jobs after a delivery report %v, want %v", ids, want)
	}
	if ids, ok, err := j.HeldJobs(len(want)); err != nil || !ok || !slices.Equal(ids, want) {
		t.Fatalf("at the bound: %v, ok %v (%v), want %v", ids, ok, err, want)
	}
	if ids, ok, err := j.HeldJobs(len(want) - 1); err != nil || ok || ids != nil {
		t.Fatalf("over the bound: %d ids, ok %v (%v), want nothing said", len(ids), ok, err)
	}
}
