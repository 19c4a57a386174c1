package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchDrainPhase runs `simrelay bench` at a tiny size and wants its
// drain phase: one phone's backlog drained (every job acked and reported
// sent and delivered, every report answered), its rate, and that rate as a
// ratio of the same run's durable sends, in the table and the JSON; and its
// pool phases: durable sends through a least_loaded and a sticky pool. On
// the PostgreSQL run the bench's server keeps its store in a database of
// the test's own (--database-url).
func TestBenchDrainPhase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	out := filepath.Join(t.TempDir(), "bench.json")
	args := []string{"bench", "--phones", "4", "--messages", "50", "--queries", "5",
		"--send-for", "500ms", "--senders", "4", "--rate", "20", "--rate-for", "500ms",
		"--inbound-rate", "10", "--inbound-for", "500ms", "--bulk-requests", "0",
		"--drain-jobs", "300", "--pool-for", "300ms", "--json", out}
	store := "bbolt"
	if st := newTestStore(t); st.databaseURL != "" {
		args, store = append(args, "--database-url", st.databaseURL), "postgres"
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	stdout, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("simrelay bench: %v\n%s\n%s", err, stdout, stderr)
	}
	if !strings.Contains(string(stdout), "one phone draining 300 jobs (ack, sent, delivered)") || !strings.Contains(string(stdout), "as a ratio of the durable send rate") {
		t.Errorf("the table has no drain rows:\n%s", stdout)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stdout), "durable sends through a pool of 4 phones: least_loaded / sticky") {
		t.Errorf("the table has no pool row:\n%s", stdout)
	}
	if !strings.Contains(string(stdout), ", store "+store+"\n") {
		t.Errorf("the report does not name the store %s:\n%s", store, stdout)
	}
	var rep struct {
		Store  string  `json:"store"`
		Least  float64 `json:"pool_least_loaded_sends_per_second"`
		Sticky float64 `json:"pool_sticky_sends_per_second"`
		Sends  float64 `json:"durable_sends_per_second"`
		Jobs   int     `json:"drain_jobs"`
		Rate   float64 `json:"drain_jobs_per_second"`
		Ratio  float64 `json:"drain_to_sends_ratio"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Store != store {
		t.Errorf("the JSON's store is %q, want %q", rep.Store, store)
	}
	if rep.Jobs != 300 || rep.Rate <= 0 || rep.Sends <= 0 {
		t.Fatalf("got drain_jobs %d at %.0f/s with %.0f sends/s, want 300 drained at some rate", rep.Jobs, rep.Rate, rep.Sends)
	}
	if rep.Least <= 0 || rep.Sticky <= 0 {
		t.Errorf("pool phases: least_loaded %.0f/s, sticky %.0f/s, want both measured", rep.Least, rep.Sticky)
	}
	if got, want := rep.Ratio, rep.Rate/rep.Sends; got < want*0.999 || got > want*1.001 {
		t.Errorf("got ratio %.4f, want drain over sends %.4f", got, want)
	}
}
