package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store/postgres"
)

// outageNode is the API of one cluster node whose way to PostgreSQL a
// test cuts and restores: its store and its shared rate-limit windows go
// through relay; logs is what it logged.
type outageNode struct {
	url   string
	relay *pgtest.Relayed
	logs  *syncbuf.Buffer
	clock *testclock.Clock
	key   string // Acme's API key
	// devices is the node's device service; company and owner are Acme's.
	devices *device.Service
	company uint64
	owner   uint64
}

func newOutageNode(t *testing.T) *outageNode {
	t.Helper()
	relay := pgtest.Relay(t, pgtest.URL(t))
	st, err := postgres.Open(context.Background(), relay.URL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	clk := testclock.New(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	accounts, err := account.New(account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}, st, nil, log, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	company, owner, key, err := accounts.CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: "a@acme.test", Password: "Correct horse battery 9"})
	if err != nil {
		t.Fatal(err)
	}
	devices := device.New(device.Config{PublicURL: "http://localhost"}, st, clk.Now)
	files, err := media.New(media.Config{PublicURL: "http://localhost", Key: []byte("media-url-key-of-the-tests-0123"), MaxBytes: testMediaMax, TempDir: t.TempDir()}, st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rate := pacing.Rate{Limit: 100, Window: time.Hour}
	api, err := httpapi.New(httpapi.Config{GeneralRate: rate, AuthRate: rate}, httpapi.Deps{
		Accounts: accounts, Devices: devices, Media: files, Store: st, Logger: log, Registry: reg, Gatherer: reg, Now: clk.Now,
		Limiters: func(scope string, rate pacing.Rate) (httpapi.Limiter, error) { return st.Windows(scope, rate) },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &outageNode{url: srv.URL, relay: relay, logs: logs, clock: clk, key: key, devices: devices, company: company.ID, owner: owner.ID}
}

// get makes a GET with the API key and returns its status and headers.
func (n *outageNode) get(t *testing.T, path string) (int, http.Header) {
	t.Helper()
	status, h, _ := n.do(t, http.MethodGet, path, n.key, "", "")
	return status, h
}

// do makes a request with the credential token (and a body of type
// contentType, when body is not empty) and returns its answer.
func (n *outageNode) do(t *testing.T, method, path, token, contentType, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, n.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(raw)
}

// lines are the log's lines that hold msg.
func (n *outageNode) lines(msg string) []string {
	var out []string
	for _, l := range strings.Split(n.logs.String(), "\n") {
		if strings.Contains(l, "msg=\""+msg+"\"") {
			out = append(out, l)
		}
	}
	return out
}

// A balancer asks /readyz every second; while PostgreSQL does not answer
// the node logs the loss once, with its cause, a reminder a minute, and
// one line when it is ready again saying how long it was not: an hour's
// outage is some sixty lines, not 3,600.
func TestReadinessLossLoggedOnceAnOutage(t *testing.T) {
	t.Parallel()
	n := newOutageNode(t)
	if status, _ := n.get(t, "/readyz"); status != http.StatusOK {
		t.Fatalf("/readyz: %d before the cut, want 200", status)
	}
	n.relay.Cut()
	poll.Until(t, "/readyz answers 503", func() bool { status, _ := n.get(t, "/readyz"); return status == http.StatusServiceUnavailable })
	for range 5 { // five more probes, a second apart on the node's clock
		n.clock.Advance(time.Second)
		if status, _ := n.get(t, "/readyz"); status != http.StatusServiceUnavailable {
			t.Fatalf("/readyz: %d with the database cut, want 503", status)
		}
	}
	failed := n.lines("readiness check failed")
	if len(failed) != 1 || !strings.Contains(failed[0], "level=ERROR") || !strings.Contains(failed[0], "cause=store") || !strings.Contains(failed[0], "err=") {
		t.Fatalf("after six failed checks the log has %d lines of them, want one ERROR naming the store and its error:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	// A minute into the outage: one reminder, saying for how long.
	n.clock.Advance(time.Minute - 5*time.Second)
	for range 3 {
		n.get(t, "/readyz")
	}
	failed = n.lines("readiness check failed")
	if len(failed) != 2 || !strings.Contains(failed[1], "not_ready_for=1m0s") {
		t.Fatalf("a minute into the outage the log has %d lines of failed checks, want the first and one reminder (not_ready_for=1m0s):\n%s", len(failed), strings.Join(failed, "\n"))
	}
	n.clock.Advance(30 * time.Second)
	n.relay.Resume()
	poll.Until(t, "/readyz answers 200 again", func() bool { status, _ := n.get(t, "/readyz"); return status == http.StatusOK })
	for range 3 {
		n.get(t, "/readyz")
	}
	back := n.lines("ready again")
	if len(back) != 1 || !strings.Contains(back[0], "level=INFO") || !strings.Contains(back[0], "not_ready_for=1m30s") {
		t.Fatalf("the log has %d lines of the return, want one INFO with not_ready_for=1m30s:\n%s", len(back), n.logs.String())
	}
	if failed := n.lines("readiness check failed"); len(failed) != 2 {
		t.Fatalf("the log has %d lines of failed checks, want 2", len(failed))
	}
}

// A request the shared windows could not count, because PostgreSQL does not
// answer, counts in the node's own window: its 503 carries the RateLimit-*
// headers every counted answer carries, with that window's figures, never a
// made-up full budget. Once the database is back the shared count goes on
// where it was, the outage's requests not in it.
func TestOutageCountsInTheNodesWindow(t *testing.T) {
	t.Parallel()
	n := newOutageNode(t)
	for i := 1; i <= 3; i++ {
		status, h := n.get(t, "/company")
		if status != http.StatusOK || h.Get("RateLimit-Remaining") != strconv.Itoa(100-i) {
			t.Fatalf("request %d: %d, RateLimit-Remaining %q; want 200 and %d", i, status, h.Get("RateLimit-Remaining"), 100-i)
		}
	}
	n.relay.Cut()
	for i := 1; i <= 2; i++ {
		status, h := n.get(t, "/company")
		if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			t.Fatalf("with the database cut: %d, Retry-After %q; want 503 with Retry-After", status, h.Get("Retry-After"))
		}
		if h.Get("RateLimit-Limit") != "100" || h.Get("RateLimit-Remaining") != strconv.Itoa(100-i) || h.Get("RateLimit-Reset") == "" {
			t.Fatalf("503 number %d: RateLimit-Limit %q, -Remaining %q, -Reset %q; want 100, %d and a reset: the node's own count",
				i, h.Get("RateLimit-Limit"), h.Get("RateLimit-Remaining"), h.Get("RateLimit-Reset"), 100-i)
		}
	}
	n.relay.Resume()
	poll.Until(t, "the database answers again", func() bool { status, _ := n.get(t, "/readyz"); return status == http.StatusOK })
	status, h := n.get(t, "/company")
	if status != http.StatusOK || h.Get("RateLimit-Remaining") != "96" {
		t.Fatalf("after the outage: %d, RateLimit-Remaining %q; want 200 and 96 (the outage's requests counted on the node only)", status, h.Get("RateLimit-Remaining"))
	}
}

// Every request that meets the database out of reach answers 503, but the
// node logs it at most once per 10 s of its clock, each line counting the
// requests it left out since the one before: an outage under load is
// thousands of requests a second, not thousands of lines. The same holds of
// the shared rate-limit windows that the outage leaves unanswered.
func TestStoreUnavailableLoggedAtMostEvery10s(t *testing.T) {
	t.Parallel()
	n := newOutageNode(t)
	n.relay.Cut()
	refused := func(count int) {
		t.Helper()
		for range count {
			if status, _ := n.get(t, "/company"); status != http.StatusServiceUnavailable {
				t.Fatalf("with the database cut: %d, want 503", status)
			}
		}
	}
	const windows = "rate limits: the shared windows do not answer; requests count in this node's memory meanwhile"
	refused(5)
	n.clock.Advance(9 * time.Second)
	refused(2)
	lines := n.lines("store unavailable")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "err=") {
		t.Fatalf("after 7 refused requests within 10 s the log has %d lines of them, want one ERROR with its error:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if lines := n.lines(windows); len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") {
		t.Fatalf("after 7 requests uncounted by the shared windows within 10 s the log has %d lines of them, want one ERROR:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	n.clock.Advance(time.Second)
	refused(1)
	lines = n.lines("store unavailable")
	if len(lines) != 2 || !strings.Contains(lines[1], "suppressed=6") {
		t.Fatalf("10 s after the first line the log has %d lines of refused requests, want a second saying suppressed=6:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if lines := n.lines(windows); len(lines) != 2 || !strings.Contains(lines[1], "suppressed=") {
		t.Fatalf("10 s after the first line the log has %d lines of the shared windows, want a second counting those left out:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// A phone's media upload while the database does not answer is 503
// unavailable, as the link's upgrade is: its token is not known bad, and a
// 401 tells the phone its device was deleted or paired again elsewhere
// (PROTOCOL.md section 4). Only a token the store does not know is 401.
func TestMediaUploadWhileTheDatabaseIsGoneAnswers503(t *testing.T) {
	t.Parallel()
	n := newOutageNode(t)
	tokens, err := n.devices.Provision(context.Background(), n.company, n.owner, []string{"agent-a"})
	if err != nil {
		t.Fatal(err)
	}
	upload := func(token string) (int, string) {
		t.Helper()
		status, _, body := n.do(t, http.MethodPost, "/device/media?key=c-1/0", token, "image/png", "not really a png")
		return status, body
	}
	if status, body := upload("dt_unknown"); status != http.StatusUnauthorized || !strings.Contains(body, `"error":"unauthorized"`) {
		t.Fatalf("an unknown token's upload: %d %s, want 401 unauthorized", status, body)
	}
	n.relay.Cut()
	if status, body := upload(tokens[0]); status != http.StatusServiceUnavailable || !strings.Contains(body, `"error":"unavailable"`) {
		t.Fatalf("an upload with the database gone: %d %s, want 503 unavailable", status, body)
	}
	n.relay.Resume()
	if status, body := upload(tokens[0]); status != http.StatusCreated {
		t.Fatalf("the upload with the database back: %d %s, want 201", status, body)
	}
}
