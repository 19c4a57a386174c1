package agent

import (
	"path/filepath"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

func TestJournalSurvivesReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := OpenJournal(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s := proto.Send{ID: "a", Channel: "sms", To: "+15551234567", Message: "x", ExpiresAt: stamp(now.Add(-25 * time.Hour))}
	if fresh, err := j.Take(s, now); err != nil || !fresh {
		t.Fatalf("first take: got %v %v, want fresh", fresh, err)
	}
	if fresh, _ := j.Take(s, now); fresh {
		t.Fatal("a second take of the same id is fresh, want a known job (never carried out twice)")
	}
	if _, err := OpenJournal(path, 50*time.Millisecond); err == nil {
		t.Fatal("a second agent opened the same journal")
	}
	if err := j.Dispatch("a", now); err != nil {
		t.Fatal(err)
	}
	j.Close()

	j, err = OpenJournal(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, ok, _ := j.NextTaken(); ok {
		t.Fatal("a dispatched job is offered again after a reopen")
	}
	jobs, _ := j.InState(StateDispatched)
	if len(jobs) != 1 || jobs[0].ID != "a" {
		t.Fatalf("dispatched jobs: got %v", jobs)
	}
	if err := j.Finish("a", proto.Status{ID: "a", Status: "failed", Error: "outcome_unknown"}, "", false, now); err != nil {
		t.Fatal(err)
	}
	if n, _ := j.Prune(now); n != 0 {
		t.Fatal("pruned a job whose report is not acknowledged")
	}
	if ok, _ := j.DropReport("a", "failed", ""); !ok {
		t.Fatal("the report was not pending")
	}
	if n, _ := j.Prune(now); n != 1 {
		t.Fatalf("pruned %d, want the finished job past its expiry + 24 h", n)
	}
}

func TestBackoffFollowsTheProtocol(t *testing.T) {
	t.Parallel()
	now := time.Now()
	b := &backoff{base: time.Second, max: 5 * time.Minute, stable: time.Minute, probe: 15 * time.Minute}
	for i := 0; i < 12; i++ {
		wait, err := b.next(nil, 0, now)
		if err != nil || wait > 5*time.Minute {
			t.Fatalf("attempt %d: got %v %v, want at most the cap", i, wait, err)
		}
	}
	if b.next(nil, time.Minute, now); b.attempt != 1 {
		t.Fatalf("a link up for STABLE resets the count: attempt %d", b.attempt)
	}
	if _, err := b.next(&closedError{code: 4501}, 0, now); err == nil {
		t.Fatal("4501 must stop the agent")
	}
	if _, err := b.next(&closedError{code: 4510}, 0, now); err == nil {
		t.Fatal("4510 must stop the agent")
	}
	if wait, err := b.next(&closedError{code: 4503}, 0, now); err != nil || wait != 15*time.Minute {
		t.Fatalf("4503: got %v %v, want a probe in 15 min", wait, err)
	}
}

func TestPairingURI(t *testing.T) {
	t.Parallel()
	server, code, err := ParsePairingURI("simrelay://pair?server=https%3A%2F%2Fsms.example.com&code=K7QX3MZP")
	if err != nil || server != "https://sms.example.com" || code != "K7QX3MZP" {
		t.Fatalf("got %q %q %v", server, code, err)
	}
	if _, _, err := ParsePairingURI("https://sms.example.com"); err == nil {
		t.Fatal("a non-pairing URI was taken")
	}
	if err := CheckServerURL("http://sms.example.com", false); err == nil {
		t.Fatal("http was allowed without --allow-http")
	}
	if err := CheckServerURL("http://127.0.0.1:8080", true); err != nil {
		t.Fatal(err)
	}
}
