package agent

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// The whole records FuzzJournalRecords keeps beside the damage.
const (
	keepTaken    = "keep-taken"
	keepDispatch = "keep-dispatched"
	keepAwait    = "keep-awaiting"
	keepReport   = "keep-report"
	keepInbound  = "s1:keep"
)

// FuzzJournalRecords writes fuzzed bytes into a real journal beside whole
// records, as a damaged disk would leave them: a job record under a fuzzed
// id, a queue entry, a report and a received message (torn JSON, garbage,
// NUL, bytes that are not UTF-8, huge values), then reopens it as a
// restart does and salvages it (Agent.Run's first step). Then: nothing
// panics; every whole record is still there; every job waiting is handed
// over once, in bounded steps, and no finished job again; a damaged job
// is named in the notes and reported failed (outcome_unknown); a second
// salvage has nothing more to say; and every read works.
func FuzzJournalRecords(f *testing.F) {
	whole, _ := json.Marshal(jobRecord{Send: proto.Send{ID: "fz", Channel: "sms", To: "+15550100001", Message: "hi"}, State: StateTaken})
	for _, s := range []struct{ key, job, queue, report, inbound string }{
		{"fz", string(whole), "fz", `{"id":"x","status":"sent"}`, `{"frame":{"client_id":"s1:x"}}`},
		{"fz", string(whole[:len(whole)/2]), "fz", `{"id":"x","status":`, `{"frame":`},
		{"fz", strings.Replace(string(whole), `"fz"`, `"other"`, 1), keepTaken, "", ""},
		{"fz", strings.Replace(string(whole), `"taken"`, `"burnt"`, 1), keepDispatch, "\x00", "\xff\xfe"},
		{"fz", strings.Replace(string(whole), `"taken"`, `"done"`, 1), "fz", "null", "[]"},
		{"fz", strings.Replace(string(whole), `"taken"`, `"awaiting_delivery"`, 1), "", "{}", "{}"},
		{keepTaken + "\xff", "\x00\x00\x00", "no-such-job", strings.Repeat("[", 5000), `{"frame":{"client_id":"` + strings.Repeat("x", 5000) + `"}}`},
		{"\xc3\x28", "{\"send\":{\"id\":\"\xc3\x28\"},\"state\":\"taken\"}", "\xc3\x28", "{\"id\":\"\x00\"}", "{\"frame\":{\"message\":\"\xed\xa0\x80\"}}"},
		{"fz", "not json at all\n", "", "", ""},
	} {
		f.Add([]byte(s.key), []byte(s.job), []byte(s.queue), []byte(s.report), []byte(s.inbound))
	}
	f.Fuzz(func(t *testing.T, key, job, queue, report, inbound []byte) {
		if len(key) == 0 || len(key) > bolt.MaxKeySize || isKeep(string(key)) {
			return // bbolt takes no such key, or it would overwrite a whole record
		}
		now := time.Now()
		path := filepath.Join(t.TempDir(), "j.db")
		j, err := OpenJournal(path, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// Durability is not what this checks: without an fsync per
		// commit the fuzzer runs many times more inputs.
		j.db.NoSync = true
		writeWholeRecords(t, j, now)
		err = j.db.Update(func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketJobs).Put(key, job); err != nil {
				return err
			}
			for _, p := range []struct {
				b []byte
				v []byte
			}{{bucketQueue, queue}, {bucketReports, report}, {bucketInbound, inbound}} {
				if len(p.v) == 0 {
					continue
				}
				b := tx.Bucket(p.b)
				seq, err := b.NextSequence()
				if err != nil {
					return err
				}
				if err := b.Put(seqKey(seq), p.v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		j.Close()

		// The restart.
		if j, err = OpenJournal(path, time.Second); err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		j.db.NoSync = true
		// A job whose outcome is journaled beside its record (a delivery
		// watch, a pending report) is kept as done, not reported failed.
		var known bool
		_ = j.db.View(func(tx *bolt.Tx) error { known = outcomeJournaled(tx, key); return nil })
		notes, err := j.Salvage(now)
		if err != nil {
			t.Fatalf("salvage: %v", err)
		}
		var r jobRecord
		damaged := json.Unmarshal(job, &r) != nil || r.Send.ID != string(key) || !knownState(r.State)
		if damaged && !slices.ContainsFunc(notes, func(n string) bool {
			return strings.Contains(n, "reported failed") || strings.Contains(n, "dropped") || strings.Contains(n, "kept as done")
		}) {
			t.Fatalf("job %q %q damaged, but the notes do not say so: %q", key, job, notes)
		}
		if again, err := j.Salvage(now); err != nil || len(again) > 0 {
			t.Fatalf("a second salvage: %q, %v; want nothing to say", again, err)
		}
		for _, state := range []string{StateDispatched, StateAwaiting} {
			jobs, err := j.InState(state)
			want := map[string]string{StateDispatched: keepDispatch, StateAwaiting: keepAwait}[state]
			if err != nil || !slices.ContainsFunc(jobs, func(j Job) bool { return j.ID == want }) {
				t.Fatalf("jobs %s: %v, %v; want %s among them", state, jobs, err, want)
			}
		}
		reports, _ := j.Reports() // a report that does not decode is named in the error, and dropped
		if !slices.ContainsFunc(reports, func(s proto.Status) bool { return s.ID == keepReport }) {
			t.Fatalf("reports %v: the whole one is gone", reports)
		}
		if damaged && utf8.Valid(key) && !known && !slices.ContainsFunc(reports, func(s proto.Status) bool {
			return s.ID == string(key) && s.Status == proto.StatusFailed && s.Error == errUnreadableJob
		}) {
			t.Fatalf("job %q damaged, reports %v: no failed report for it", key, reports)
		}
		recs, _ := j.inbound()
		if !slices.ContainsFunc(recs, func(r inboundRecord) bool { return r.Frame.ClientID == keepInbound }) {
			t.Fatalf("received messages %v: the whole one is gone", recs)
		}
		if r, err := j.Reports(); err != nil {
			t.Fatalf("reports read again: %v, %v", r, err)
		}
		if r, err := j.inbound(); err != nil {
			t.Fatalf("received messages read again: %v, %v", r, err)
		}
		handed := map[string]bool{}
		for range 4 {
			next, ok, err := j.NextTaken()
			if err != nil {
				t.Fatalf("next job: %v", err)
			}
			if !ok {
				break
			}
			if handed[next.ID] || (next.ID != keepTaken && next.ID != string(key)) {
				t.Fatalf("job %q handed over (handed before: %v)", next.ID, handed)
			}
			handed[next.ID] = true
			if err := j.Dispatch(next.ID, now); err != nil {
				t.Fatal(err)
			}
		}
		if _, more, _ := j.NextTaken(); more || !handed[keepTaken] {
			t.Fatalf("jobs handed over: %v (more: %v); want %s once, and an end", handed, more, keepTaken)
		}
		if _, err := j.Prune(now.Add(72 * time.Hour)); err != nil {
			t.Fatalf("prune: %v", err)
		}
	})
}

func isKeep(id string) bool {
	return id == keepTaken || id == keepDispatch || id == keepAwait || id == keepReport
}

// writeWholeRecords journals a job in each state that is not finished, a
// report and a received message, as the agent does.
func writeWholeRecords(t testing.TB, j *Journal, now time.Time) {
	t.Helper()
	exp := stamp(now.Add(time.Hour))
	for _, id := range []string{keepTaken, keepDispatch, keepAwait, keepReport} {
		if _, err := j.Take(proto.Send{ID: id, Channel: proto.ChannelSMS, To: "+15550100001", Message: "hi", SIMSlot: "SIM1", ExpiresAt: exp}, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{keepDispatch, keepAwait, keepReport} {
		if err := j.Dispatch(id, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Finish(keepAwait, proto.Status{}, "ref", true, now); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(keepReport, proto.Status{ID: keepReport, Status: proto.StatusSent, At: stamp(now)}, "", false, now); err != nil {
		t.Fatal(err)
	}
	msg := proto.Inbound{ClientID: keepInbound, Channel: proto.ChannelSMS, From: "+15550000001", Message: "hi", SIMSlot: "SIM1"}
	if _, err := j.takeInbound([]proto.Inbound{msg}, []string{""}, [][]string{nil}, [][]spooled{nil}, "", ""); err != nil {
		t.Fatal(err)
	}
}

// FuzzJournalFile damages a real journal file as a disk or an interrupted
// copy may: cut short at a fuzzed length, a fuzzed run of bytes written
// over it at a fuzzed place. The agent's start (open, salvage, every read)
// then either refuses the file as damaged, with an error naming it, or
// works: never a fault of bbolt's memory map (which no recover catches),
// a panic, or a cursor looping over a page that names itself.
func FuzzJournalFile(f *testing.F) {
	base := filepath.Join(f.TempDir(), "base.db")
	j, err := OpenJournal(base, time.Second)
	if err != nil {
		f.Fatal(err)
	}
	writeWholeRecords(f, j, time.Now())
	j.Close()
	good, err := os.ReadFile(base)
	if err != nil {
		f.Fatal(err)
	}
	pages := uint32(len(good) / os.Getpagesize())
	for p := range pages {
		at := p * uint32(os.Getpagesize())
		f.Add(uint32(len(good)), at, []byte{0xff, 0xff, 0xff, 0xff})
		f.Add(uint32(len(good)), at+16, []byte(strings.Repeat("\x00", 64)))
		f.Add(uint32(len(good)), at+8, []byte{0x01, 0x00, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(p), 0, 0, 0, 0, 0, 0, 0})
		f.Add(at, uint32(0), []byte(nil))
		f.Add(at+100, uint32(0), []byte(nil))
	}
	f.Fuzz(func(t *testing.T, cut, at uint32, over []byte) {
		data := bytes.Clone(good)
		if int(cut) < len(data) {
			data = data[:cut]
		}
		if int(at) < len(data) {
			copy(data[at:], over)
		}
		path := filepath.Join(t.TempDir(), "j.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := OpenJournal(path, time.Second)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		defer j.Close()
		j.db.NoSync = true
		if _, err := j.Salvage(time.Now()); err != nil {
			return // a write the file refused: said at start, the agent stops
		}
		_, _ = j.InState(StateDispatched)
		_, _ = j.InState(StateAwaiting)
		_, _ = j.Reports()
		_, _ = j.inbound()
		for range 8 {
			next, ok, err := j.NextTaken()
			if err != nil || !ok {
				break
			}
			if err := j.Dispatch(next.ID, time.Now()); err != nil {
				break
			}
		}
		_, _ = j.Prune(time.Now().Add(72 * time.Hour))
	})
}
