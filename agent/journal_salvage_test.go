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
// journaled with it; or a report of it waits for its status_ack) is not
// reported failed: the server would show a message that went out as
// failed, and whoever sent it would send it again. A damaged record with
// no such trace is still reported failed with outcome_unknown.
func TestSalvageKeepsAKnownOutcome(t *testing.T) {
	t.Parallel()
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	now := time.Now()
	exp := stamp(now.Add(time.Hour))
	for _, id := range []string{"job-awaiting", "job-reported", "job-unknown"} {
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
	err = j.db.Update(func(tx *bolt.Tx) error {
		for _, id := range []string{"job-awaiting", "job-reported", "job-unknown"} {
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
	for _, id := range []string{"job-awaiting", "job-reported", "job-unknown"} {
		err := j.db.View(func(tx *bolt.Tx) error {
			r, ok, err := getJob(tx, id)
			if err != nil || !ok || r.State != StateDone {
				t.Errorf("%s: state %q, found %v, err %v; want done", id, r.State, ok, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
