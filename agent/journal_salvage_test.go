package agent

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// A damaged record of a job whose outcome the journal shows elsewhere (it
// awaits its delivery report, so it went out and its sent report was
// journaled with it; a report of it waits for its status_ack; or its
// final report was acked long ago) is not reported failed: the server
// would show a message that went out as failed, and whoever sent it would
// send it again. A damaged record with no such trace is still reported
// failed with outcome_unknown.
func TestSalvageKeepsAKnownOutcome(t *testing.T) {
	t.Parallel()
	j := tempJournal(t)
	now := time.Now()
	exp := stamp(now.Add(time.Hour))
	for _, id := range []string{"job-awaiting", "job-reported", "job-acked", "job-unknown"} {
		if _, err := j.Take(proto.Send{ID: id, Channel: "sms", To: "+15551234567", Message: "hi", SIMSlot: "SIM1", ExpiresAt: exp}, now); err != nil {
			t.Fatal(err)
		}
		if err := j.Dispatch(id, now); err != nil {
			t.Fatal(err)
		}
	}
	// job-awaiting went out and its sent report was acked; job-reported
	// went out with no delivery to wait for, its report not yet acked.
	if err := j.Finish("job-awaiting", proto.Status{ID: "job-awaiting", Status: proto.StatusSent, At: stamp(now)}, "ref-1", true, now); err != nil {
		t.Fatal(err)
	}
	if _, err := j.DropReport("job-awaiting", proto.StatusSent, ""); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish("job-reported", proto.Status{ID: "job-reported", Status: proto.StatusSent, At: stamp(now)}, "", false, now); err != nil {
		t.Fatal(err)
	}
	// job-acked went out and was delivered, both reports acked: nothing
	// of it is left but its record.
	if err := j.Finish("job-acked", proto.Status{ID: "job-acked", Status: proto.StatusSent, At: stamp(now)}, "ref-3", true, now); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish("job-acked", proto.Status{ID: "job-acked", Status: proto.StatusDelivered, At: stamp(now)}, "", false, now); err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{proto.StatusSent, proto.StatusDelivered} {
		if ok, err := j.DropReport("job-acked", st, ""); err != nil || !ok {
			t.Fatalf("status_ack of job-acked %s: %v, %v", st, ok, err)
		}
	}
	err := j.db.Update(func(tx *bolt.Tx) error {
		for _, id := range []string{"job-awaiting", "job-reported", "job-acked", "job-unknown"} {
			if err := tx.Bucket(bucketJobs).Put([]byte(id), []byte(`{"send":{"id":"job-`)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Salvage(now); err != nil {
		t.Fatal(err)
	}
	reports, err := j.Reports()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, r := range reports {
		got[r.ID] = append(got[r.ID], r.Status+"/"+r.Error)
	}
	if len(got["job-awaiting"]) != 0 {
		t.Errorf("job-awaiting, which went out, is reported %v", got["job-awaiting"])
	}
	if want := []string{"sent/"}; len(got["job-reported"]) != 1 || got["job-reported"][0] != want[0] {
		t.Errorf("job-reported is reported %v, want only its own report %v", got["job-reported"], want)
	}
	if len(got["job-acked"]) != 0 {
		t.Errorf("job-acked, whose reports were all acked, is reported %v", got["job-acked"])
	}
	if want := "failed/" + errUnreadableJob; len(got["job-unknown"]) != 1 || got["job-unknown"][0] != want {
		t.Errorf("job-unknown is reported %v, want %s", got["job-unknown"], want)
	}
	awaiting, err := j.InState(StateAwaiting)
	if err != nil {
		t.Fatal(err)
	}
	if len(awaiting) != 0 {
		t.Errorf("jobs still awaiting their delivery: %v", awaiting)
	}
	// Each is kept under its id, done: a resend is acked, not carried out.
	for _, id := range []string{"job-awaiting", "job-reported", "job-acked", "job-unknown"} {
		err := j.db.View(func(tx *bolt.Tx) error {
			r, ok, err := getJob(tx, id)
			if err != nil || !ok || r.State != StateDone {
				t.Errorf("%s: state %q, found %v, err %v; want done", id, r.State, ok, err)
			}
			if id == "job-acked" && r.Final != proto.StatusDelivered {
				t.Errorf("%s: final %q, want its last report's %q", id, r.Final, proto.StatusDelivered)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Once the jobs are forgotten, so is the note that they were settled.
	for _, r := range reports {
		if _, err := j.DropReport(r.ID, r.Status, r.Detail); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := j.Prune(now.Add(2 * DefaultJobRetention)); err != nil || n != 4 {
		t.Fatalf("prune: %d jobs, %v; want 4", n, err)
	}
	_ = j.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketSettled).Cursor().First(); k != nil {
			t.Errorf("a settled note outlives its job: %q", k)
		}
		return nil
	})
}

// A read receipt of a job whose record was damaged after its detail was
// reported and acked is not reported a second time: the repaired record
// keeps no transport reference, so no receipt finds it (a later, newer
// detail is not reported either: the record that would place it is gone).
// The receipt a transport hands over again after a restart is the usual
// case; before the repair it reports nothing new (detailRank).
func TestSalvagedJobReportsNoDetailAgain(t *testing.T) {
	t.Parallel()
	j := tempJournal(t)
	now := time.Now()
	const id, ref = "job-read", "ref-1"
	if _, err := j.Take(proto.Send{ID: id, Channel: "whatsapp", To: "+15551234567", Message: "hi", ExpiresAt: stamp(now.Add(time.Hour))}, now); err != nil {
		t.Fatal(err)
	}
	if err := j.Dispatch(id, now); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(id, proto.Status{ID: id, Status: proto.StatusSent, At: stamp(now)}, ref, true, now); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(id, proto.Status{ID: id, Status: proto.StatusDelivered, At: stamp(now)}, "", false, now); err != nil {
		t.Fatal(err)
	}
	if added, err := j.AddDetail(ref, proto.DetailRead, stamp(now)); err != nil || !added {
		t.Fatalf("the read receipt: %v, %v; want it reported", added, err)
	}
	ack := func() {
		t.Helper()
		reports, err := j.Reports()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reports {
			if _, err := j.DropReport(r.ID, r.Status, r.Detail); err != nil {
				t.Fatal(err)
			}
		}
	}
	ack()
	if added, err := j.AddDetail(ref, proto.DetailRead, stamp(now)); err != nil || added {
		t.Fatalf("the read receipt again, before the repair: %v, %v; want nothing reported", added, err)
	}
	err := j.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketJobs).Put([]byte(id), []byte(`{"send":{"id":"job-`)) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Salvage(now); err != nil {
		t.Fatal(err)
	}
	for _, detail := range []string{proto.DetailRead, proto.DetailPlayed} {
		if added, err := j.AddDetail(ref, detail, stamp(now)); err != nil || added {
			t.Errorf("a %s receipt after the repair: %v, %v; want nothing reported", detail, added, err)
		}
	}
	if reports, err := j.Reports(); err != nil || len(reports) != 0 {
		t.Errorf("reports after the repair: %v, %v; want none", reports, err)
	}
}

// tempJournal is a new journal in the test's temporary directory, closed
// when the test ends.
func tempJournal(t *testing.T) *Journal {
	t.Helper()
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}
