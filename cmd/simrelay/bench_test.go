package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/bench"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
)

// TestBenchDrainPhase runs `simrelay bench` at a tiny size and wants its
// drain phase: one phone's backlog drained (every job acked and reported
// sent and delivered, every report answered), its rate, and that rate as a
// ratio of the same run's durable sends, in the table and the JSON; and its
// pool phases: durable sends through a least_loaded and a sticky pool; and
// its restart phase: the server killed while sends stream in and started
// again, every send it answered before dying on its phone after. On
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
		"--drain-jobs", "300", "--pool-for", "300ms", "--restart-after", "300ms", "--json", out}
	store := "bbolt"
	var env []string
	if st := newTestStore(t); st.databaseURL != "" {
		args, store = append(args, "--database-url", st.databaseURL), "postgres"
		// The restart phase's server, killed and started again alone on
		// PostgreSQL, waits for its killed run's beat to leave the live
		// window, as startServer's do: the bench hands its environment to
		// its servers, so the window is the tests' 4 s, not 10 s.
		env = append(os.Environ(), "SIMRELAY_NODE_LIVE_WINDOW="+testLiveWindow)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	stdout := runBench(t, cmd)
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
	for _, row := range []string{"4 phones online from none (a hello each)", "kill -9 and restart: listening / phones linked p50 / all"} {
		if !strings.Contains(string(stdout), row) {
			t.Errorf("the table has no row %q:\n%s", row, stdout)
		}
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
		// The restart phase's sends answered before the kill, and those of
		// them that never reached a phone.
		Answered int64   `json:"restart_sends_answered_before_kill"`
		Lost     int64   `json:"restart_sends_lost"`
		Linked   float64 `json:"restart_kill_to_phones_linked_max_ms"`
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
	if rep.Answered <= 0 || rep.Lost != 0 || rep.Linked <= 0 {
		t.Errorf("restart phase: %d sends answered before the kill, %d lost, phones linked again after %.0f ms; want some answered, none lost, the phones back", rep.Answered, rep.Lost, rep.Linked)
	}
	if got, want := rep.Ratio, rep.Rate/rep.Sends; got < want*0.999 || got > want*1.001 {
		t.Errorf("got ratio %.4f, want drain over sends %.4f", got, want)
	}
}

// TestBenchRestartWaitsForAnAnsweredSend: the restart phase kills the
// server only once a send has been answered, whatever its length: a server
// slower to answer than --restart-after (here each commit held a second,
// as a loaded machine's may take) was killed with no send answered, and the
// phase checked nothing and printed no row.
func TestBenchRestartWaitsForAnAnsweredSend(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	storetest.EmbeddedOnly(t, "--slow-sync holds the embedded store's writer")
	t.Parallel()
	bin := buildBinary(t)
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(bin, "bench", "--phones", "2", "--messages", "0", "--queries", "1", "--senders", "2",
		"--send-for", "0s", "--rate-for", "0s", "--inbound-for", "0s", "--drain-jobs", "0", "--bulk-requests", "0", "--pool-for", "0s",
		"--restart-after", "100ms", "--slow-sync", "1s", "--json", out)
	stdout := runBench(t, cmd)
	if !strings.Contains(string(stdout), "kill -9 and restart: listening / phones linked p50 / all") {
		t.Errorf("the table has no restart row:\n%s", stdout)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Answered int64 `json:"restart_sends_answered_before_kill"`
		Lost     int64 `json:"restart_sends_lost"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Answered <= 0 || rep.Lost != 0 {
		t.Errorf("restart phase: %d sends answered before the kill, %d lost; want some answered, none lost", rep.Answered, rep.Lost)
	}
}

// TestBenchCluster runs `simrelay bench --nodes 3` at a tiny size on a
// database of the test's own and an embedded NATS server: sends on one node
// and on three, send -> phone with the phone on the same and on another
// node, and a node killed under its phones, each in the table and the JSON;
// every send made after the kill reaches its phone.
func TestBenchCluster(t *testing.T) {
	clusterTest(t)
	bin := buildBinary(t)
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(bin, "bench", "--nodes", "3", "--database-url", pgtest.URL(t), "--nats-url", natstest.Start(t),
		"--phones", "6", "--send-for", "500ms", "--senders", "4", "--rate", "20", "--rate-for", "500ms",
		"--failover-phones", "2", "--json", out)
	stdout := runBench(t, cmd)
	for _, row := range []string{"durable sends, answered and acked by the phone: 1 node / 3 nodes", "phone on the same node, p50 / p99",
		"phone on another node, p50 / p99", "kill -9 of a node -> its 2 phones' new links", "kill -9 -> a send made at once on another node"} {
		if !strings.Contains(string(stdout), row) {
			t.Errorf("the table has no row %q:\n%s", row, stdout)
		}
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.ClusterReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Nodes != 3 || rep.Phones != 6 || rep.OneNodeSendsPerSec <= 0 || rep.NodesSendsPerSec <= 0 {
		t.Errorf("got %d nodes, %d phones, %.0f and %.0f sends/s; want 3 nodes, 6 phones, both rates measured", rep.Nodes, rep.Phones, rep.OneNodeSendsPerSec, rep.NodesSendsPerSec)
	}
	if rep.SameNodeP50ms <= 0 || rep.OtherNodeP50ms <= 0 {
		t.Errorf("send -> phone: same node p50 %.2f ms, other node p50 %.2f ms; want both measured", rep.SameNodeP50ms, rep.OtherNodeP50ms)
	}
	if rep.FailoverPhones != 2 || rep.FailoverLinkP50ms <= 0 || rep.FailoverSendP50ms <= 0 || rep.FailoverSendsLost != 0 {
		t.Errorf("failover: %d phones, new link p50 %.0f ms, send p50 %.0f ms, %d lost; want 2 phones, both measured, none lost",
			rep.FailoverPhones, rep.FailoverLinkP50ms, rep.FailoverSendP50ms, rep.FailoverSendsLost)
	}
}

// The cluster bench refuses what it cannot run with a message that says
// what to give.
func TestBenchClusterFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "3", "--nats-url", "nats://127.0.0.1:1"}, "share one PostgreSQL database: give --database-url"},
		{[]string{"--nodes", "3", "--database-url", "postgres://x@/y"}, "need a bus: give --nats-url"},
		{[]string{"--nats-url", "nats://127.0.0.1:1"}, "measure a cluster: give --nodes (SIMRELAY_NODES) too"},
		{[]string{"--nodes", "2", "--drain-jobs", "5"}, "--drain-jobs (SIMRELAY_DRAIN_JOBS) sizes a phase of the single-node bench"},
		{[]string{"--nodes", "0"}, "--nodes (SIMRELAY_NODES) 0: want 1 (one server) or more"},
	} {
		var stdout, stderr strings.Builder
		code := benchCmd(t.Context(), append(c.args, "--json", ""), &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("bench %v: exit %d, stderr %q; want it to say %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// A size the bench cannot run with is refused before anything starts,
// naming the flag: --phones -5 panicked, --rate 0 ran every phase before
// it and panicked in the latency phase's pace, and --senders 0 and
// --queries 0 measured nothing and printed it as results. The binary runs
// them: the panics were the process's end.
func TestBenchRefusesSizesItCannotRunWith(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	// Small enough that a bench that takes them runs in seconds.
	small := []string{"bench", "--phones", "2", "--messages", "10", "--queries", "2", "--send-for", "100ms", "--senders", "2",
		"--rate", "10", "--rate-for", "100ms", "--inbound-rate", "5", "--inbound-for", "100ms", "--bulk-requests", "0",
		"--drain-jobs", "0", "--pool-for", "0s", "--restart-after", "0s", "--json", ""}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--phones", "-5"}, "--phones (SIMRELAY_PHONES) -5: want 1 or more"},
		{[]string{"--rate", "0"}, "--rate (SIMRELAY_RATE) 0: want 1 or more"},
		{[]string{"--senders", "0"}, "--senders (SIMRELAY_SENDERS) 0: want 1 or more"},
		{[]string{"--queries", "0"}, "--queries (SIMRELAY_QUERIES) 0: want 1 or more"},
		{[]string{"--send-for", "-1s"}, "--send-for (SIMRELAY_SEND_FOR) -1s: want 0 or more"},
		// Each message of a timed phase is queued and kept: 2,000,000,000
		// a second for 10 s ran the earlier phases, then died out of
		// memory with its server running; a million a second for 2 s ran
		// the webhook phase for minutes.
		{[]string{"--rate", "2000000000", "--rate-for", "10s"},
			"--rate (SIMRELAY_RATE) 2000000000 for --rate-for (SIMRELAY_RATE_FOR) 10s is 20000000000 messages: want at most 1000000"},
		{[]string{"--inbound-rate", "1000000", "--inbound-for", "2s"},
			"--inbound-rate (SIMRELAY_INBOUND_RATE) 1000000 for --inbound-for (SIMRELAY_INBOUND_FOR) 2s is 2000000 messages: want at most 1000000"},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append(slices.Clip(small), c.args...)...)
			cmd.WaitDelay = 5 * time.Second // a server it left holds its stderr
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "TMPDIR="+cmd.Dir) // what a panic leaves goes with the test
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); err == nil || code != 2 || !strings.Contains(stderr.String(), c.want) || strings.Contains(stderr.String(), "panic") {
				t.Errorf("bench %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
			}
		})
	}
}

// runBench runs the bench command in a directory of its own and answers its
// output, failing t with its output and errors when it fails.
func runBench(t *testing.T, cmd *exec.Cmd) []byte {
	t.Helper()
	cmd.Dir = t.TempDir()
	stdout, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: %v\n%s\n%s", strings.Join(cmd.Args[1:], " "), err, stdout, stderr)
	}
	return stdout
}

// TestBenchExitsOneOnLostSends: a run whose restart phase found sends
// answered before the kill and never on a phone after it exits 1, saying
// so on a line of its own, its figures printed and written all the same;
// it exited 0, a check that found lost data passing. A run that lost none
// exits 0.
func TestBenchExitsOneOnLostSends(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lost int64
		code int
	}{{0, 0}, {3, 1}} {
		path := filepath.Join(t.TempDir(), "bench.json")
		var stdout, stderr strings.Builder
		rep := bench.Report{Phones: 2, RestartAnswered: 120, RestartLost: c.lost}
		code := finishBench(rep, path, &stdout, &stderr)
		want := "simrelay bench: lost data: 3 of the 120 sends answered 2xx before the kill -9 never reached a phone after the restart"
		if c.lost == 0 {
			want = ""
		}
		if code != c.code || want != "" && !strings.Contains(stderr.String(), want) || want == "" && stderr.Len() > 0 {
			t.Errorf("%d lost: exit %d, stderr %q; want %d and %q", c.lost, code, stderr.String(), c.code, want)
		}
		raw, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(raw), `"restart_sends_lost"`) || !strings.Contains(stdout.String(), "kill -9 and restart") {
			t.Errorf("%d lost: the figures were not printed and written: %v\n%s", c.lost, err, stdout.String())
		}
	}
}

// The bench's server takes no server setting from the bench's environment
// (SIMRELAY_*, but the cluster's node timing): a shell set up for a
// production server named its e-mail to SMS listener, its mail relay, its
// plans, and the bench's server took them. Here the listener's port is
// held: a server that takes it does not start, and the bench failed.
func TestBenchServerTakesNoServerSettingsFromItsEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cmd := exec.Command(bin, "bench", "--phones", "2", "--messages", "10", "--queries", "2", "--send-for", "100ms", "--senders", "2",
		"--rate", "10", "--rate-for", "100ms", "--inbound-rate", "5", "--inbound-for", "100ms", "--bulk-requests", "0",
		"--drain-jobs", "0", "--pool-for", "0s", "--restart-after", "0s", "--json", "")
	cmd.Env = append(os.Environ(), "SIMRELAY_SMTP_LISTEN="+held.Addr().String(), "SIMRELAY_SMTP_DOMAIN=sms.example.com")
	runBench(t, cmd)
}

// A run whose server's RSS fell while its phones linked (a few hundred
// phones after a large seeding, its memory returned to the system) says
// the figure was not measured: it printed "-7.1 KB" per idle phone.
func TestBenchPrintsNoNegativeMemoryPerPhone(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	printReport(&out, bench.Report{Phones: 300, RSSPerPhoneKB: -7.1, AnonPerPhoneKB: -10.1, HeapPerPhoneKB: 12.3})
	if strings.Contains(out.String(), "-7.1") || strings.Contains(out.String(), "-10.1") {
		t.Errorf("the report prints a negative memory per phone:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "not measured") {
		t.Errorf("the report does not say the memory per phone was not measured:\n%s", out.String())
	}
}

// A run with --bulk-requests 0 skips the bulk phase ("0: skip it"), as
// --drain-jobs 0, --pool-for 0s and --restart-after 0s skip theirs: its
// table has no bulk row, where it printed "stored / dispatched 0 / 0 /s".
func TestBenchPrintsNoRowOfASkippedBulkPhase(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	printReport(&out, bench.Report{Phones: 20, SendsPerSecond: 2376})
	if strings.Contains(out.String(), "bulk sends") {
		t.Errorf("the report prints the bulk phase that was skipped:\n%s", out.String())
	}
	out.Reset()
	printReport(&out, bench.Report{Phones: 20, BulkStored: 1000, BulkStoredPerSec: 5220, BulkDispatchPerSec: 1187})
	if !strings.Contains(out.String(), "bulk sends") || !strings.Contains(out.String(), "5220 / 1187 /s") {
		t.Errorf("the report lacks the bulk phase that ran:\n%s", out.String())
	}
}

// A zero length skips its phase, as --pool-for 0s and --drain-jobs 0 skip
// theirs: --send-for 0s, --rate-for 0s and --inbound-for 0s measure
// nothing, and the table prints no row for them, where it printed "0 /s"
// durable sends and latencies of 0.00 ms under their targets (and a drain
// at 0.00 of a send rate never measured), as if measured.
func TestBenchPrintsNoRowOfAZeroLengthPhase(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	printReport(&out, bench.Report{Phones: 5, DrainJobs: 100, DrainPerSecond: 2675,
		Skipped: []string{bench.PhaseSends, bench.PhaseLatency, bench.PhaseWebhook}})
	for _, row := range []string{"durable sends, answered", "as a ratio of the durable send rate", "send -> frame on phone", "inbound -> webhook"} {
		if strings.Contains(out.String(), row) {
			t.Errorf("the report prints %q of a skipped phase:\n%s", row, out.String())
		}
	}
	if !strings.Contains(out.String(), "one phone draining 100 jobs") {
		t.Errorf("the report lacks the drain phase that ran:\n%s", out.String())
	}
}

// The Go heap and stack per idle phone fall too at a few phones (what the
// server held before they linked was freed meanwhile): a run of 5 phones
// printed "Go stack per idle phone -12.8 KB". Such a figure is not
// measured, as the RSS's is not.
func TestBenchPrintsNoNegativeHeapOrStackPerPhone(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	printReport(&out, bench.Report{Phones: 5, RSSPerPhoneKB: 3, AnonPerPhoneKB: 2, HeapPerPhoneKB: 99.2, LiveHeapPerPhoneKB: -11.8, StackPerPhoneKB: -12.8, GoroutinesPerPhone: 1})
	if strings.Contains(out.String(), "-11.8") || strings.Contains(out.String(), "-12.8") {
		t.Errorf("the report prints a negative heap or stack per phone:\n%s", out.String())
	}
	for _, row := range []string{"Go heap in use / live per idle phone", "Go stack per idle phone"} {
		i := strings.Index(out.String(), row)
		if i < 0 || !strings.Contains(strings.SplitN(out.String()[i:], "\n", 2)[0], "not measured") {
			t.Errorf("the report's %q row does not say it was not measured:\n%s", row, out.String())
		}
	}
}
