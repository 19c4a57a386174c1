package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// A second agent on the same journal, and a journal file that is not one,
// get errors that say what is wrong and what to do.
func TestJournalOpenErrors(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agent.journal.db")
	j, err := OpenJournal(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := OpenJournal(path, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "in use by another simrelay-agent") {
		t.Fatalf("second open: got %v, want the journal in use", err)
	}

	bad := filepath.Join(t.TempDir(), "agent.journal.db")
	if err := os.WriteFile(bad, []byte(strings.Repeat("not a journal\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = OpenJournal(bad, time.Second)
	if err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("damaged journal: got %v, want an error naming the file as damaged", err)
	}
}

// A report or inbound record the journal cannot read is deleted and named
// once; it does not hold back the readable ones behind it.
func TestUnreadableRecordsDoNotBlockTheOutbox(t *testing.T) {
	t.Parallel()
	h := &fakeHub{t: t}
	h.script = func(_ int, ws *websocket.Conn, frames <-chan proto.Frame) {
		for f := range frames {
			switch f := f.(type) {
			case *proto.Status:
				write(context.Background(), ws, proto.StatusAck{ID: f.ID, Status: f.Status})
			case *proto.Inbound:
				write(context.Background(), ws, proto.InboundAck{ClientID: f.ClientID, ID: 1, UUID: "u"})
			}
		}
	}
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := OpenJournal(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = j.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketReports).Put(seqKey(1), []byte("{not json")); err != nil {
			return err
		}
		if err := tx.Bucket(bucketReports).SetSequence(1); err != nil {
			return err
		}
		if err := tx.Bucket(bucketInbound).Put(seqKey(1), []byte("{not json")); err != nil {
			return err
		}
		if err := tx.Bucket(bucketInbound).SetSequence(1); err != nil {
			return err
		}
		return addReport(tx, proto.Status{ID: "job-9", Status: proto.StatusSent, At: stamp(time.Now())})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.takeInbound([]proto.Inbound{{ClientID: "s1:m1", Channel: "sms", From: "+15550000001", Message: "hi", SIMSlot: "SIM1"}}, []string{""}, [][]string{nil}, [][]spooled{nil}, "", ""); err != nil {
		t.Fatal(err)
	}
	j.Close()

	_, j, _ = startAgentWithJournal(t, h, &memTransport{inbox: make(chan Received)}, path)
	poll.Until(t, "the readable report and message are acknowledged", func() bool {
		reports, rerr := j.Reports()
		recs, ierr := j.inbound()
		return rerr == nil && ierr == nil && len(reports) == 0 && len(recs) == 0 && h.seen(`"id":"job-9"`) == 1 && h.seen(`"client_id":"s1:m1"`) == 1
	})
}

// A job record the disk damaged, at the head of the queue, neither stops
// the agent nor holds back the job behind it: it is reported failed
// (outcome_unknown) and never carried out, and the whole job goes out once.
func TestDamagedJobIsReportedAndDoesNotBlockTheQueue(t *testing.T) {
	t.Parallel()
	h := &fakeHub{t: t}
	h.script = func(_ int, ws *websocket.Conn, frames <-chan proto.Frame) {
		for f := range frames {
			if st, ok := f.(*proto.Status); ok {
				write(context.Background(), ws, proto.StatusAck{ID: st.ID, Status: st.Status})
			}
		}
	}
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := OpenJournal(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exp := stamp(time.Now().Add(time.Hour))
	for _, id := range []string{"job-bad", "job-ok"} {
		if _, err := j.Take(proto.Send{ID: id, Channel: "sms", To: "+15551234567", Message: "hi", SIMSlot: "SIM1", ExpiresAt: exp}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	err = j.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).Put([]byte("job-bad"), []byte(`{"send":{"id":"job-b`))
	})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()

	tr := &memTransport{inbox: make(chan Received)}
	startAgentWithJournal(t, h, tr, path)
	poll.Until(t, "the damaged job is reported failed and the whole one is sent", func() bool {
		return h.seen(`"id":"job-bad","status":"failed","error":"outcome_unknown"`) == 1 && h.seen(`"id":"job-ok","status":"sent"`) == 1
	})
	if tr.count("job-bad") != 0 || tr.count("job-ok") != 1 {
		t.Fatalf("carried out: job-bad %d times, job-ok %d times; want 0 and 1", tr.count("job-bad"), tr.count("job-ok"))
	}
}
