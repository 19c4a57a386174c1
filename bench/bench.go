package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Config sets the sizes of a run; the defaults finish in about a minute.
type Config struct {
	Binary       string        // the simrelay binary to start as the server
	Phones       int           // idle phones to connect (10,000)
	SendFor      time.Duration // length of the throughput phase (10 s)
	Senders      int           // concurrent REST senders in the throughput phase (64)
	Rate         int           // sends per second of the latency phase (1,000)
	RateFor      time.Duration // length of the latency phase (5 s)
	InboundRate  int           // inbound messages per second to the webhook (500)
	InboundFor   time.Duration // length of the webhook phase (4 s)
	SeedMessages int           // history stored before the list phase (1,000,000)
	Queries      int           // requests per list measurement (2,000)
	BulkRequests int           // bulk sends of 1,000 messages in the bulk phase (100)
	DrainJobs    int           // the backlog of the drain phase's one phone (5,000)
	PoolFor      time.Duration // length of each pool phase, least_loaded and sticky (5 s; 0: skip them)
	RestartAfter time.Duration // sends stream this long, and on until one is answered, before the server is killed and started again (2 s; 0: skip it)
	Log          io.Writer     // progress lines
	// ServerArgs are extra flags for the server (e.g. --pprof-listen to profile it).
	ServerArgs []string
	// DatabaseURL puts the store in this PostgreSQL database, which must
	// hold no company; empty: a new embedded store in a temporary directory.
	DatabaseURL string
}

// Defaults of a run.
func Defaults() Config {
	return Config{Phones: 10000, SendFor: 10 * time.Second, Senders: 64, Rate: 1000, RateFor: 5 * time.Second,
		InboundRate: 500, InboundFor: 4 * time.Second, SeedMessages: 1000000, Queries: 2000, BulkRequests: 100, DrainJobs: 5000,
		PoolFor: 5 * time.Second, RestartAfter: 2 * time.Second}
}

// Report is what a run measured.
type Report struct {
	Machine        string  `json:"machine"`
	Store          string  `json:"store"` // bbolt or postgres
	Phones         int     `json:"phones"`
	PhonesNote     string  `json:"phones_note,omitempty"`
	RSSPerPhoneKB  float64 `json:"rss_per_idle_phone_kb"`
	AnonPerPhoneKB float64 `json:"anon_rss_per_idle_phone_kb"`
	// HeapPerPhoneKB is the Go heap in use (HeapInuse: spans holding
	// objects, live or not yet reused); LiveHeapPerPhoneKB the bytes of
	// live objects alone (HeapAlloc), both after a collection.
	HeapPerPhoneKB     float64 `json:"heap_per_idle_phone_kb"`
	LiveHeapPerPhoneKB float64 `json:"live_heap_per_idle_phone_kb"`
	GoroutinesPerPhone float64 `json:"server_goroutines_per_phone"`
	StackPerPhoneKB    float64 `json:"stack_per_idle_phone_kb"`
	ServerRSSMB        float64 `json:"server_rss_mb_with_phones"`
	// ConnectSeconds is how long the phones took to come online from
	// nothing (each hello a durable device write), as after a restart.
	ConnectSeconds   float64 `json:"connect_seconds"`
	ConnectPerSecond float64 `json:"phones_connected_per_second"`
	SendsPerSecond   float64 `json:"durable_sends_per_second"`
	SendsAnswered    int64   `json:"sends_answered"`
	SendsReceived    int64   `json:"sends_received_and_acked"`
	// SendsBehind is how many answered sends had not reached their phones
	// when the throughput phase ended; SendsCatchUpMs is how long after the
	// end the last of them arrived (0 when none was behind).
	SendsBehind    int64   `json:"sends_not_on_phones_at_phase_end"`
	SendsCatchUpMs float64 `json:"sends_last_on_phone_after_phase_ms"`
	DrainJobs      int     `json:"drain_jobs"`
	DrainPerSecond float64 `json:"drain_jobs_per_second"`
	// DrainRatio is one phone's drain rate over the durable sends per
	// second of the same run (all phones).
	DrainRatio         float64 `json:"drain_to_sends_ratio"`
	BulkStored         int64   `json:"bulk_messages_stored"`
	BulkStoredPerSec   float64 `json:"bulk_stored_per_second"`
	BulkDispatchPerSec float64 `json:"bulk_dispatched_per_second"`
	// PoolLeastLoadedPerSec and PoolStickyPerSec are durable sends per
	// second through a pool of PoolMembers phones (100, or all phones when
	// fewer) that picks the member.
	PoolMembers           int     `json:"pool_members,omitempty"`
	PoolLeastLoadedPerSec float64 `json:"pool_least_loaded_sends_per_second,omitempty"`
	PoolStickyPerSec      float64 `json:"pool_sticky_sends_per_second,omitempty"`
	// The restart phase: the server killed (SIGKILL) while sends stream in,
	// then started again on the same store.
	RestartAnswered    int64   `json:"restart_sends_answered_before_kill,omitempty"`
	RestartBehind      int64   `json:"restart_sends_not_on_phones_at_kill"`
	RestartLost        int64   `json:"restart_sends_lost"`
	RestartListeningMs float64 `json:"restart_kill_to_listening_ms,omitempty"`
	RestartLinkedP50Ms float64 `json:"restart_kill_to_phones_linked_p50_ms,omitempty"`
	RestartLinkedMaxMs float64 `json:"restart_kill_to_phones_linked_max_ms,omitempty"`
	SendP50ms          float64 `json:"send_to_phone_p50_ms"`
	SendP99ms          float64 `json:"send_to_phone_p99_ms"`
	SendRate           int     `json:"send_to_phone_rate_per_second"`
	WebhookP50ms       float64 `json:"inbound_to_webhook_p50_ms"`
	WebhookP99ms       float64 `json:"inbound_to_webhook_p99_ms"`
	WebhookNote        string  `json:"inbound_to_webhook_note,omitempty"`
	StoredMessages     int     `json:"stored_messages"`
	HistoryP99ms       float64 `json:"history_page_p99_ms"`
	ConversationsP99   float64 `json:"conversation_list_p99_ms"`
	DashboardP50ms     float64 `json:"dashboard_summary_p50_ms"`
	DashboardP99ms     float64 `json:"dashboard_summary_p99_ms"`
	Analytics90P50ms   float64 `json:"analytics_90_days_p50_ms"`
	Analytics90P99ms   float64 `json:"analytics_90_days_p99_ms"`
	SeedSeconds        float64 `json:"seed_seconds"`
	// Interrupted names the phase a stop signal (SIGINT, SIGTERM, SIGHUP)
	// cut: that phase and those after it were not measured, and their
	// figures are zero. Empty when the run went to its end.
	Interrupted string `json:"interrupted,omitempty"`
	// Skipped names the phases a zero length or count left out
	// (--send-for 0s, --drain-jobs 0): not measured, their figures zero.
	Skipped []string `json:"skipped,omitempty"`
}

// The phases of a run, in the order Run takes them (Report.Interrupted
// names one; Report.Measured tells those that ran to their end).
const (
	PhasePrepare    = "prepare"            // the store filled and the server started
	PhaseIdle       = "idle phones"        // phones online from none, memory per idle phone
	PhaseSends      = "durable sends"      // the throughput phase
	PhasePool       = "pool"               // least_loaded and sticky
	PhaseDrain      = "drain"              // one phone's backlog
	PhaseLatency    = "send -> phone"      // the latency phase
	PhaseWebhook    = "inbound -> webhook" // the webhook phase
	PhaseLists      = "history and conversation lists"
	PhaseDashboards = "dashboard and analytics"
	PhaseRestart    = "kill -9 and restart"
	PhaseBulk       = "bulk sends"
)

var phaseOrder = []string{PhasePrepare, PhaseIdle, PhaseSends, PhasePool, PhaseDrain, PhaseLatency, PhaseWebhook,
	PhaseLists, PhaseDashboards, PhaseRestart, PhaseBulk}

// Measured reports whether the run took phase to its end: every phase of a
// run that was not interrupted, else those before the one cut, but those
// it skipped.
func (r Report) Measured(phase string) bool {
	if slices.Contains(r.Skipped, phase) {
		return false
	}
	if r.Interrupted == "" {
		return true
	}
	return slices.Index(phaseOrder, phase) < slices.Index(phaseOrder, r.Interrupted)
}

// Run measures one server. A stop signal (ctx ending) cuts the phase
// under way: the report then has the figures of the phases before it and
// names it in Interrupted, with no error; the server is stopped and the
// temporary store removed all the same.
func Run(ctx context.Context, cfg Config) (rep Report, err error) {
	phase := PhasePrepare
	defer func() {
		// A phase cut by the signal fails or comes back short (its server
		// is stopped under it): neither is a figure, nor an error.
		if phase != "" && ctx.Err() != nil {
			rep.Interrupted, err = phase, nil
		}
	}()
	rep = Report{Machine: fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU()), Store: "bbolt"}
	if cfg.DatabaseURL != "" {
		rep.Store = "postgres"
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	n, note := phonesWithinLimit(cfg.Phones)
	rep.Phones, rep.PhonesNote = n, note
	if note != "" {
		logf("%s", note)
	}
	dir, err := os.MkdirTemp("", "simrelay-bench-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)

	fps := phoneFingerprints(n)
	seedDevices := seedFingerprints()
	logf("preparing a store with %d phones and %d stored messages ...", n, cfg.SeedMessages)
	st, err := openStore(ctx, dir, cfg.DatabaseURL)
	if err != nil {
		return rep, err
	}
	key, tokens, _, err := prepare(st, append(append(append([]string(nil), fps...), drainFingerprint), seedDevices...))
	if err != nil {
		st.Close()
		return rep, err
	}
	drainToken := tokens[n]
	tokens = tokens[:n]
	start := time.Now()
	if err := seedHistory(ctx, st, seedDevices, cfg.SeedMessages); err != nil {
		st.Close()
		return rep, err
	}
	// The embedded store is one process's at a time: the server's next.
	if err := st.Close(); err != nil {
		return rep, err
	}
	rep.StoredMessages, rep.SeedSeconds = cfg.SeedMessages, time.Since(start).Seconds()

	srv, err := startServer(ctx, cfg.Binary, dir, cfg.DatabaseURL, os.Stderr, cfg.ServerArgs...)
	if err != nil {
		return rep, err
	}
	defer func() { srv.stop() }() // the restart phase replaces srv
	api := &apiClient{base: srv.url, key: key, hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}

	// Memory per idle phone.
	phase = PhaseIdle
	if !sleep(ctx, time.Second) { // let start-up allocations settle before the baseline
		return rep, nil
	}
	if err := srv.gc(); err != nil {
		return rep, fmt.Errorf("bench: collect the server's garbage: %w", err)
	}
	rss0, anon0, _ := srv.memory()
	heap0, _ := srv.metric("go_memstats_heap_inuse_bytes")
	live0, _ := srv.metric("go_memstats_heap_alloc_bytes")
	gr0, _ := srv.metric("go_goroutines")
	stack0, _ := srv.metric("go_memstats_stack_inuse_bytes")
	logf("connecting %d phones from 127.0.0.x ...", n)
	connectStart := time.Now()
	fleet, err := connect(ctx, []string{srv.url}, fps, tokens)
	if err != nil {
		return rep, err
	}
	defer fleet.stop()
	connectSeconds := time.Since(connectStart).Seconds()
	logf("connected: %d phones online in %.1f s (%.0f/s)", n, connectSeconds, float64(n)/connectSeconds)
	if !sleep(ctx, 3*time.Second) { // idle
		return rep, nil
	}
	if err := srv.gc(); err != nil {
		return rep, fmt.Errorf("bench: collect the server's garbage: %w", err)
	}
	rss1, anon1, _ := srv.memory()
	heap1, _ := srv.metric("go_memstats_heap_inuse_bytes")
	live1, _ := srv.metric("go_memstats_heap_alloc_bytes")
	gr1, _ := srv.metric("go_goroutines")
	stack1, _ := srv.metric("go_memstats_stack_inuse_bytes")
	if ctx.Err() != nil {
		return rep, nil
	}
	rep.ConnectSeconds, rep.ConnectPerSecond = connectSeconds, float64(n)/connectSeconds
	rep.StackPerPhoneKB = (stack1 - stack0) / float64(n) / 1024
	rep.GoroutinesPerPhone = (gr1 - gr0) / float64(n)
	rep.RSSPerPhoneKB = float64(rss1-rss0) / float64(n) / 1024
	rep.AnonPerPhoneKB = float64(anon1-anon0) / float64(n) / 1024
	rep.HeapPerPhoneKB = (heap1 - heap0) / float64(n) / 1024
	rep.LiveHeapPerPhoneKB = (live1 - live0) / float64(n) / 1024
	rep.ServerRSSMB = float64(rss1) / (1 << 20)
	logf("%s", idleLine(rep))

	// Durable send throughput: answered 2xx after fsync, each taken and acked by its phone.
	phase = PhaseSends
	if cfg.SendFor > 0 {
		logf("sending as fast as %d senders can for %s ...", cfg.Senders, cfg.SendFor)
		tp, err := throughput(ctx, []*apiClient{api}, fleet, fps, cfg.Senders, cfg.SendFor)
		if err != nil || ctx.Err() != nil {
			return rep, err
		}
		rep.SendsAnswered, rep.SendsReceived, rep.SendsPerSecond = tp.answered, tp.received, tp.perSecond
		rep.SendsBehind, rep.SendsCatchUpMs = tp.behind, float64(tp.catchUp.Microseconds())/1000
		logf("throughput: %.0f durable sends/s (%d answered, %d received and acked); %d not on their phones when the phase ended, the last %.0f ms later",
			rep.SendsPerSecond, rep.SendsAnswered, rep.SendsReceived, rep.SendsBehind, rep.SendsCatchUpMs)
	} else {
		rep.Skipped = append(rep.Skipped, PhaseSends)
	}

	// The same through sender pools of 100 phones that choose the member.
	phase = PhasePool
	if cfg.PoolFor > 0 {
		var rates [2]float64
		for i, strategy := range []string{"least_loaded", "sticky"} {
			logf("sending through a %s pool of %d phones for %s ...", strategy, min(poolMembers, len(fps)), cfg.PoolFor)
			perSecond, err := poolThroughput(ctx, api, fleet, fps, strategy, cfg.Senders, cfg.PoolFor)
			if err != nil || ctx.Err() != nil {
				return rep, err
			}
			rates[i] = perSecond
			logf("pool %s: %.0f durable sends/s", strategy, perSecond)
		}
		rep.PoolMembers, rep.PoolLeastLoadedPerSec, rep.PoolStickyPerSec = min(poolMembers, len(fps)), rates[0], rates[1]
	} else {
		rep.Skipped = append(rep.Skipped, PhasePool)
	}

	// One phone back from an outage drains its backlog, acking and
	// reporting at once; set against the all-phones rate just measured.
	phase = PhaseDrain
	if cfg.DrainJobs > 0 {
		logf("one phone draining a backlog of %d jobs ...", cfg.DrainJobs)
		perSecond, err := drain(ctx, api, drainToken, cfg.DrainJobs)
		if err != nil || ctx.Err() != nil {
			return rep, err
		}
		rep.DrainJobs, rep.DrainPerSecond = cfg.DrainJobs, perSecond
		if rep.SendsPerSecond > 0 {
			rep.DrainRatio = rep.DrainPerSecond / rep.SendsPerSecond
			logf("drain: %.0f jobs/s, %.2f of the durable send rate", rep.DrainPerSecond, rep.DrainRatio)
		} else {
			logf("drain: %.0f jobs/s", rep.DrainPerSecond) // no send rate measured to set it against
		}
	} else {
		rep.Skipped = append(rep.Skipped, PhaseDrain)
	}

	// Send -> frame on the phone at a fixed rate.
	phase = PhaseLatency
	if cfg.RateFor > 0 {
		lat, err := latency(ctx, func(int) *apiClient { return api }, fleet, fps, cfg.Rate, cfg.RateFor)
		if err != nil || ctx.Err() != nil {
			return rep, err
		}
		rep.SendRate = cfg.Rate
		rep.SendP50ms, rep.SendP99ms = pct(lat, 50), pct(lat, 99)
		logf("send -> phone at %d/s: p50 %.2f ms, p99 %.2f ms (%d samples)", cfg.Rate, rep.SendP50ms, rep.SendP99ms, len(lat))
	} else {
		rep.Skipped = append(rep.Skipped, PhaseLatency)
	}

	// Inbound -> webhook received.
	phase = PhaseWebhook
	if cfg.InboundFor > 0 {
		wl, wnote := webhookLatency(ctx, api, fleet, cfg.InboundRate, cfg.InboundFor)
		if ctx.Err() != nil {
			return rep, nil
		}
		rep.WebhookNote = wnote
		if len(wl) > 0 {
			rep.WebhookP50ms, rep.WebhookP99ms = pct(wl, 50), pct(wl, 99)
		}
		line := fmt.Sprintf("inbound -> webhook at %d/s: p50 %.2f ms, p99 %.2f ms", cfg.InboundRate, rep.WebhookP50ms, rep.WebhookP99ms)
		if wnote != "" {
			line += " " + wnote
		}
		logf("%s", line)
	} else {
		rep.Skipped = append(rep.Skipped, PhaseWebhook)
	}

	// Lists over the stored history.
	phase = PhaseLists
	historyP99, convP99, err := lists(ctx, api, seedDevices, cfg.SeedMessages, cfg.Queries)
	if err != nil || ctx.Err() != nil {
		return rep, err
	}
	rep.HistoryP99ms, rep.ConversationsP99 = historyP99, convP99
	logf("over %d stored messages: history page p99 %.2f ms, conversation list p99 %.2f ms", cfg.SeedMessages, rep.HistoryP99ms, rep.ConversationsP99)

	// The dashboard and 90 days of analytics over the same history.
	phase = PhaseDashboards
	summary, analytics, err := dashboards(ctx, api, cfg.Queries)
	if err != nil || ctx.Err() != nil {
		return rep, err
	}
	rep.DashboardP50ms, rep.DashboardP99ms = pct(summary, 50), pct(summary, 99)
	rep.Analytics90P50ms, rep.Analytics90P99ms = pct(analytics, 50), pct(analytics, 99)
	logf("dashboard summary p50 %.2f ms, p99 %.2f ms; 90-day analytics p50 %.2f ms, p99 %.2f ms", rep.DashboardP50ms, rep.DashboardP99ms, rep.Analytics90P50ms, rep.Analytics90P99ms)

	// A crash and a restart: what the phones and the sends answered before it see.
	phase = PhaseRestart
	if cfg.RestartAfter > 0 {
		logf("killing the server (SIGKILL) after %s of sends, then starting it again ...", cfg.RestartAfter)
		again := func(listen string) (*server, error) {
			return startServer(ctx, cfg.Binary, dir, cfg.DatabaseURL, os.Stderr, append(slices.Clip(cfg.ServerArgs), "--listen", listen)...)
		}
		rs, err := restart(ctx, &srv, again, fleet, api, fps, cfg.Senders, cfg.RestartAfter)
		if err != nil || ctx.Err() != nil {
			// Cut by the signal, the sends not on a phone are no loss: the
			// server was stopped under them.
			return rep, err
		}
		rep.RestartAnswered, rep.RestartBehind, rep.RestartLost = rs.answered, rs.behind, rs.lost
		rep.RestartListeningMs, rep.RestartLinkedP50Ms, rep.RestartLinkedMaxMs = rs.listeningMs, rs.linkedP50Ms, rs.linkedMaxMs
		logf("restart: listening %.0f ms after the kill, phones linked again p50 %.0f ms, all %.0f ms; %d sends answered before the kill, %d not on their phones then, %d lost",
			rs.listeningMs, rs.linkedP50Ms, rs.linkedMaxMs, rs.answered, rs.behind, rs.lost)
	} else {
		rep.Skipped = append(rep.Skipped, PhaseRestart)
	}

	// Bulk sends: 1,000 messages a request, one commit each. Last, since the
	// phones' acks of 100,000 jobs keep the store busy after the phase ends.
	phase = PhaseBulk
	if cfg.BulkRequests > 0 {
		logf("sending %d bulk requests of %d messages ...", cfg.BulkRequests, bulkSize)
		stored, storedPerSec, dispatchPerSec, err := bulkThroughput(ctx, api, fleet, fps, cfg.BulkRequests)
		if err != nil || ctx.Err() != nil {
			return rep, err
		}
		rep.BulkStored, rep.BulkStoredPerSec, rep.BulkDispatchPerSec = stored, storedPerSec, dispatchPerSec
		logf("bulk: %.0f messages stored/s, %.0f dispatched/s (%d messages)", rep.BulkStoredPerSec, rep.BulkDispatchPerSec, rep.BulkStored)
	} else {
		rep.Skipped = append(rep.Skipped, PhaseBulk)
	}
	phase = ""
	return rep, nil
}

// idleLine is the idle phase's progress line. A server whose RSS fell
// while its phones linked (a few phones after a seeding, its memory
// returned to the system) has no RSS figure per phone: the line says so,
// as the report's table does, rather than print a negative size (the JSON
// keeps the raw difference); so for the Go heap and stack, which fall too
// at a few phones.
func idleLine(rep Report) string {
	rss := "RSS not measured: it fell (use thousands of phones)"
	if rep.RSSPerPhoneKB >= 0 && rep.AnonPerPhoneKB >= 0 {
		rss = fmt.Sprintf("%.1f KB RSS (%.1f KB anonymous)", rep.RSSPerPhoneKB, rep.AnonPerPhoneKB)
	}
	heap := "heap not measured: it fell"
	if rep.HeapPerPhoneKB >= 0 && rep.LiveHeapPerPhoneKB >= 0 {
		heap = fmt.Sprintf("%.1f KB heap in use (%.1f KB live)", rep.HeapPerPhoneKB, rep.LiveHeapPerPhoneKB)
	}
	stack := "stack not measured: it fell"
	if rep.StackPerPhoneKB >= 0 {
		stack = fmt.Sprintf("%.1f KB stack", rep.StackPerPhoneKB)
	}
	return fmt.Sprintf("idle: %s, %s, %s and %.2f goroutines per phone", rss, heap, stack, rep.GoroutinesPerPhone)
}

// sleep waits d, or less when ctx ends first; it reports whether ctx is
// still on.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// apiClient calls the REST API with the company's key.
type apiClient struct {
	base, key string
	hc        *http.Client
}

func (a *apiClient) do(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	return res.StatusCode, out, err
}

// sendPhase is what the throughput phase measured.
type sendPhase struct {
	answered, received int64
	perSecond          float64
	// behind is how many answered sends had not reached their phones when
	// the last sender had its answer; catchUp is how long after that the
	// last of them arrived.
	behind  int64
	catchUp time.Duration
}

// throughput sends as fast as the senders can, sender w through
// apis[w%len(apis)], until d has passed or ctx ends. A send answered other
// than 200 (or not answered) fails the phase: on the bench's own server
// none is refused, and a figure that left them out would measure less than
// it says.
func throughput(ctx context.Context, apis []*apiClient, f *fleet, fps []string, senders int, d time.Duration) (sendPhase, error) {
	before := f.received.Load()
	var ok atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for w := range senders {
		api := apis[w%len(apis)]
		wg.Go(func() {
			for i := 0; time.Now().Before(stop) && ctx.Err() == nil && failed.Load() == nil; i++ {
				fp := fps[(w*7919+i)%len(fps)]
				code, body, err := api.do("POST", "/chat/send", map[string]string{"device_fingerprint": fp, "phone": "+15551234567", "message": "throughput"})
				if err := answered(api, code, body, err); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	end := time.Now()
	var out sendPhase
	if e := failed.Load(); e != nil && ctx.Err() == nil {
		return out, *e
	}
	out.answered = ok.Load()
	out.perSecond = float64(out.answered) / end.Sub(start).Seconds()
	out.behind = max(out.answered-(f.received.Load()-before), 0)
	deadline := end.Add(60 * time.Second)
	for f.received.Load()-before < out.answered && time.Now().Before(deadline) && sleep(ctx, time.Millisecond) {
	}
	if out.behind > 0 {
		out.catchUp = time.Since(end)
	}
	out.received = f.received.Load() - before
	return out, nil
}

// answered is nil for a send answered 200, else the error that fails its
// phase, naming the answer.
func answered(api *apiClient, code int, body []byte, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("bench: POST /chat/send: %w", err)
	case code != http.StatusOK:
		return fmt.Errorf("bench: POST %s/chat/send answered %d: %s", api.base, code, bytes.TrimSpace(body))
	}
	return nil
}

// latencySeq numbers the latency phases' messages.
var latencySeq atomic.Int64

// latency sends at a fixed rate to random phones, each through via(phone
// index), and gives the time from each send to its frame on the phone: as
// many as arrived within 30 s of the last send. A send answered other than
// 200 fails the phase, as in throughput.
func latency(ctx context.Context, via func(phone int) *apiClient, f *fleet, fps []string, rate int, d time.Duration) ([]time.Duration, error) {
	total := int(float64(rate) * d.Seconds())
	for len(f.lat) > 0 {
		<-f.lat
	}
	jobs := make(chan int, total)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range jobs {
				if failed.Load() != nil {
					continue
				}
				// Unique across phases: a phone's frames are matched to
				// their sends by text.
				text := fmt.Sprintf("latency %d", latencySeq.Add(1))
				phone := rand.IntN(len(fps))
				f.sent.Store(text, time.Now())
				api := via(phone)
				code, body, err := api.do("POST", "/chat/send", map[string]string{"device_fingerprint": fps[phone], "phone": "+15551234567", "message": text})
				if err := answered(api, code, body, err); err != nil {
					f.sent.Delete(text)
					failed.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := range total {
		if failed.Load() != nil || !sleep(ctx, time.Until(start.Add(time.Duration(i)*interval))) {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if e := failed.Load(); e != nil && ctx.Err() == nil {
		return nil, *e
	}
	var out []time.Duration
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < total && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case l := <-f.lat:
			out = append(out, l)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return out, nil
}

// pct is the p-th percentile in milliseconds.
func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(float64(len(s)-1) * p / 100)
	return float64(s[idx].Microseconds()) / 1000
}

// phoneFingerprints names the bench's n phones.
func phoneFingerprints(n int) []string {
	fps := make([]string, n)
	for i := range fps {
		fps[i] = fmt.Sprintf("phone-%05d", i)
	}
	return fps
}
