package agent

import (
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// reportsOf lists the pending reports as "status/detail".
func reportsOf(t *testing.T, j *Journal) []string {
	t.Helper()
	rs, err := j.Reports()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, r.Status+"/"+r.Detail)
	}
	return out
}

func sameList(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestJournalDetails: a read receipt is a report of its own, after the
// plain delivered, kept until the status_ack that echoes its detail; a
// repeated or older detail adds nothing, and a job is not pruned while
// a detail report waits.
func TestJournalDetails(t *testing.T) {
	t.Parallel()
	j := tempJournal(t)
	now := time.Now()
	for _, id := range []string{"a", "b"} {
		if _, err := j.Take(proto.Send{ID: id, Channel: "whatsapp", To: "+15551234567", ExpiresAt: stamp(now.Add(-25 * time.Hour))}, now); err != nil {
			t.Fatal(err)
		}
		if err := j.Dispatch(id, now); err != nil {
			t.Fatal(err)
		}
		if err := j.Finish(id, proto.Status{ID: id, Status: proto.StatusSent}, "wa-"+id, true, now); err != nil {
			t.Fatal(err)
		}
		if _, err := j.DropReport(id, proto.StatusSent, ""); err != nil {
			t.Fatal(err)
		}
	}

	// a: delivered, then read, a repeat, played, a late read.
	if err := j.Finish("a", proto.Status{ID: "a", Status: proto.StatusDelivered}, "", false, now); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{proto.DetailRead, proto.DetailRead, proto.DetailPlayed, proto.DetailRead} {
		if _, err := j.AddDetail("wa-a", d, stamp(now)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := reportsOf(t, j), []string{"delivered/", "delivered/read", "delivered/played"}; !sameList(got, want) {
		t.Fatalf("reports %v, want %v", got, want)
	}
	// The ack of the plain delivered leaves the detail reports.
	if ok, _ := j.DropReport("a", proto.StatusDelivered, ""); !ok {
		t.Fatal("the plain delivered was not pending")
	}
	if ok, _ := j.DropReport("a", proto.StatusDelivered, proto.DetailRead); !ok {
		t.Fatal("the read report was not pending")
	}
	if n, _ := j.Prune(now); n != 0 {
		t.Fatal("pruned a job whose played report is not acknowledged")
	}
	if ok, _ := j.DropReport("a", proto.StatusDelivered, proto.DetailPlayed); !ok {
		t.Fatal("the played report was not pending")
	}

	// b: the read receipt settles the awaiting job: delivered, then read.
	if err := j.Finish("b", proto.Status{ID: "b", Status: proto.StatusDelivered, Detail: proto.DetailRead}, "", false, now); err != nil {
		t.Fatal(err)
	}
	if got, want := reportsOf(t, j), []string{"delivered/", "delivered/read"}; !sameList(got, want) {
		t.Fatalf("reports %v, want %v", got, want)
	}
	if added, _ := j.AddDetail("wa-b", proto.DetailRead, stamp(now)); added {
		t.Fatal("a repeated read was journaled again")
	}
	if added, _ := j.AddDetail("wa-unknown", proto.DetailRead, stamp(now)); added {
		t.Fatal("a read of an unknown message was journaled")
	}
	for _, d := range []string{"", proto.DetailRead} {
		if _, err := j.DropReport("b", proto.StatusDelivered, d); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := j.Prune(now); n != 2 {
		t.Fatalf("pruned %d, want both jobs once every report is acknowledged", n)
	}
}

// TestJournalSettlesOnce: a receipt is pushed (Sink.Deliver) and also
// answered to the delivery poller, which may have listed the job as
// awaiting before the push settled it. Its late Finish journals nothing
// again: the delivered report already went and was status_acked, and a
// second one under the same key would wait in the outbox for an answer
// the link never asks for (the pump sends a report once per link). Only a
// newer detail is news.
func TestJournalSettlesOnce(t *testing.T) {
	t.Parallel()
	j := tempJournal(t)
	now := time.Now()
	const id = "j1"
	if _, err := j.Take(proto.Send{ID: id, Channel: "whatsapp", To: "+15551234567", ExpiresAt: stamp(now.Add(time.Hour))}, now); err != nil {
		t.Fatal(err)
	}
	if err := j.Dispatch(id, now); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(id, proto.Status{ID: id, Status: proto.StatusSent}, "wa-1", true, now); err != nil {
		t.Fatal(err)
	}
	if _, err := j.DropReport(id, proto.StatusSent, ""); err != nil {
		t.Fatal(err)
	}
	// The push settles the job; its report is acknowledged.
	if err := j.Finish(id, proto.Status{ID: id, Status: proto.StatusDelivered}, "", false, now); err != nil {
		t.Fatal(err)
	}
	if ok, _ := j.DropReport(id, proto.StatusDelivered, ""); !ok {
		t.Fatal("the delivered report was not pending")
	}
	// The poller's late answers: the same delivery, a timeout, a failure.
	for _, st := range []proto.Status{{ID: id, Status: proto.StatusDelivered}, {}, {ID: id, Status: proto.StatusFailed, Error: "x"}} {
		if err := j.Finish(id, st, "", false, now); err != nil {
			t.Fatal(err)
		}
		if got := reportsOf(t, j); len(got) != 0 {
			t.Fatalf("after a late %q: reports %v, want none", st.Status, got)
		}
	}
	// A late answer with a newer detail is journaled once, alone.
	for range 2 {
		if err := j.Finish(id, proto.Status{ID: id, Status: proto.StatusDelivered, Detail: proto.DetailRead}, "", false, now); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := reportsOf(t, j), []string{"delivered/read"}; !sameList(got, want) {
		t.Fatalf("reports %v, want %v", got, want)
	}
	if ok, _ := j.DropReport(id, proto.StatusDelivered, proto.DetailRead); !ok {
		t.Fatal("the read report was not pending")
	}
	if added, err := j.AddDetail("wa-1", proto.DetailRead, stamp(now)); err != nil || added {
		t.Fatalf("AddDetail of the read already journaled: %v %v", added, err)
	}
}
