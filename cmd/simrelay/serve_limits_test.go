package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
	"github.com/simrelay/simrelay/store/postgres"
)

// limitsNode is one node of a two-node cluster in a test: its own store
// handle (its own pool) on the shared database, its own bus connection, an
// account service and the API, served on loopback.
type limitsNode struct {
	url      string
	dbURL    string
	store    *postgres.Store
	accounts *account.Service
	devices  *device.Service
	shared   sharedLimits
}

func startLimitsNode(t *testing.T, dbURL, natsURL, name string, rate pacing.Rate) *limitsNode {
	t.Helper()
	n := startSharedLimits(t, dbURL, natsURL, name, func([]byte) map[string]string { return map[string]string{} })
	reg := prometheus.NewRegistry()
	api, err := httpapi.New(httpapi.Config{GeneralRate: rate, AuthRate: rate, TrustedProxies: loopbackProxies()},
		httpapi.Deps{Accounts: n.accounts, Logger: slog.New(slog.DiscardHandler), Registry: reg, Gatherer: reg, Now: time.Now, Limiters: n.shared.limiters})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	n.url = srv.URL
	return n
}

// startSharedLimits runs one node's shared limits, on its own store
// handle and bus connection, with settings as its compared settings,
// until the test ends; the node serves no API (startLimitsNode adds it).
func startSharedLimits(t *testing.T, dbURL, natsURL, name string, settings func([]byte) map[string]string) *limitsNode {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st, err := postgres.Open(context.Background(), dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	bus, err := connectBus(context.Background(), natsURL, name, st, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	mailer, err := mail.New(mail.Config{PublicURL: "http://localhost"}, st, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := account.New(account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}, st, mailer, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	devices := device.New(device.Config{PublicURL: "http://localhost"}, st, time.Now)
	devices.SetAlerts(device.Alerts{Mailer: mailer, OfflineGrace: time.Millisecond})
	shared, err := shareLimits(bus, st, accounts, devices, settings, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); shared.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &limitsNode{dbURL: dbURL, store: st, accounts: accounts, devices: devices, shared: shared}
}

// nodeCall makes a request with the API key and returns its status and headers.
func nodeCall(t *testing.T, method, url, key string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body json.RawMessage
	_ = json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, res.Header, body
}

// twoNodes starts two nodes on one fresh database and one bus, and waits
// until each knows the other.
func twoNodes(t *testing.T, rate pacing.Rate) (a, b *limitsNode) {
	t.Helper()
	dbURL, natsURL := pgtest.URL(t), natstest.Start(t)
	a = startLimitsNode(t, dbURL, natsURL, "a", rate)
	b = startLimitsNode(t, dbURL, natsURL, "b", rate)
	poll.Until(t, "the nodes know each other", func() bool {
		return slices.Equal(a.shared.peers.Live(), []string{"b"}) && slices.Equal(b.shared.peers.Live(), []string{"a"})
	})
	return a, b
}

// A key's requests split over two nodes are refused at the count one node
// refuses them at, with the headers one node sends.
func TestClusterRateLimitCountsOnce(t *testing.T) {
	t.Parallel()
	const limit = 6
	a, b := twoNodes(t, pacing.Rate{Limit: limit, Window: time.Hour})
	_, _, key, err := a.accounts.CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: "a@acme.test", Password: "Correct horse battery 9"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= limit+2; i++ {
		node := a
		if i%2 == 0 {
			node = b
		}
		status, h, body := nodeCall(t, http.MethodGet, node.url+"/company", key)
		wantStatus, wantRemaining := http.StatusOK, max(limit-i, 0)
		if i > limit {
			wantStatus = http.StatusTooManyRequests
		}
		if status != wantStatus || h.Get("RateLimit-Remaining") != strconv.Itoa(wantRemaining) || h.Get("RateLimit-Limit") != strconv.Itoa(limit) {
			t.Fatalf("request %d: got %d remaining %q limit %q, want %d remaining %d limit %d (%s)",
				i, status, h.Get("RateLimit-Remaining"), h.Get("RateLimit-Limit"), wantStatus, wantRemaining, limit, body)
		}
		if status == http.StatusTooManyRequests {
			if h.Get("Retry-After") == "" || h.Get("Retry-After") != h.Get("RateLimit-Reset") || !strings.Contains(string(body), `"rate_limited"`) {
				t.Errorf("the refusal: Retry-After %q, RateLimit-Reset %q, body %s; want both set and equal, and the rate_limited body",
					h.Get("Retry-After"), h.Get("RateLimit-Reset"), body)
			}
		}
	}
}

// An account's reset mails asked for on both nodes are counted once: the
// cluster sends account.ResetMailsPerHour of them an hour, not that many
// from each node.
func TestClusterResetMailsCountOnce(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, pacing.Rate{Limit: 100, Window: time.Hour})
	const email = "a@acme.test"
	if _, _, _, err := a.accounts.CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: email, Password: "Correct horse battery 9"}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 * account.ResetMailsPerHour {
		node := []*limitsNode{a, b}[i%2]
		res, err := testhttp.Client.Post(node.url+"/auth/forgot-password", "application/json", strings.NewReader(`{"email": "`+email+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("ask %d: status %d, want 200", i+1, res.StatusCode)
		}
	}
	mails, err := a.store.Mails(false)
	if err != nil {
		t.Fatal(err)
	}
	resets := 0
	for _, m := range mails {
		if m.To == email && strings.Contains(m.Text, "/reset-password?token=") {
			resets++
		}
	}
	if resets != account.ResetMailsPerHour {
		t.Errorf("%d asks split between two nodes sent %d reset mails, want %d", 2*account.ResetMailsPerHour, resets, account.ResetMailsPerHour)
	}
}

// A company's offline mails on both nodes are counted once: phones
// reported offline by either node get device.OfflineMailsPerHour mails in
// all, not that many from each node.
func TestClusterOfflineMailsCountOnce(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, pacing.Rate{Limit: 100, Window: time.Hour})
	c, _, _, err := a.accounts.CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: "a@acme.test", Password: "Correct horse battery 9"})
	if err != nil {
		t.Fatal(err)
	}
	users, err := a.store.CompanyUsers(c.ID)
	if err != nil || len(users) != 1 {
		t.Fatalf("the company's users: %v, %v", users, err)
	}
	if _, err := a.store.UpdateUser(users[0].ID, func(u *store.User) error { u.EmailVerified = true; return nil }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	phones := 2 * device.OfflineMailsPerHour
	fps := make([]string, phones)
	for i := range fps {
		fps[i] = fmt.Sprintf("pixel-%d", i)
	}
	tokens, err := a.devices.Provision(ctx, c.ID, 0, fps)
	if err != nil {
		t.Fatal(err)
	}
	var presences []*device.Presence
	for _, n := range []*limitsNode{a, b} {
		p := n.devices.NewPresence(func(string, uint64) bool { return false })
		presences = append(presences, p)
	}
	for i, tok := range tokens {
		n := []*limitsNode{a, b}[i%2]
		dev, err := n.devices.Authenticate(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if dev, err = n.devices.Hello(ctx, dev, device.CheckedHello{}); err != nil {
			t.Fatal(err)
		}
		presences[i%2].Down(dev)
	}
	poll.Within(t, 10*time.Second, "every phone reported offline", func() bool {
		for _, fp := range fps {
			d, err := a.devices.Get(ctx, c.ID, fp)
			if err != nil || d.Health == nil || d.Health.Presence != store.PresenceOffline {
				return false
			}
		}
		return true
	})
	for _, p := range presences {
		p.Stop()
	}
	mails, err := a.store.Mails(true)
	if err != nil {
		t.Fatal(err)
	}
	if len(mails) != device.OfflineMailsPerHour {
		t.Errorf("%d phones reported offline by two nodes queued %d mails, want %d", phones, len(mails), device.OfflineMailsPerHour)
	}
}

// An e-mail address's failed logins on both nodes are counted once: the
// failure after account.DefaultLoginRate's limit is refused 429 on either
// node, however the tries split between them, the right password too, and
// a right login on one node takes back its own try only.
func TestClusterFailedLoginsCountOnce(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, pacing.Rate{Limit: 1000, Window: time.Hour})
	const email, password = "a@acme.test", "Correct horse battery 9"
	if _, _, _, err := a.accounts.CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: email, Password: password}); err != nil {
		t.Fatal(err)
	}
	// Each try from a client address of its own (the nodes trust the
	// loopback as their proxy), so that none has had its share of the
	// address's failures (account.ClientShare): what is counted once is
	// the address's limit.
	tries := 0
	login := func(node *limitsNode, password string) (int, http.Header) {
		t.Helper()
		tries++
		req, err := http.NewRequest(http.MethodPost, node.url+"/auth/login", strings.NewReader(`{"email": "`+email+`", "password": "`+password+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("2001:db8:%x::1", tries))
		res, err := testhttp.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode, res.Header
	}
	limit := account.DefaultLoginRate.Limit
	for i := range limit {
		if i == limit/2 {
			if status, _ := login(b, password); status != http.StatusOK {
				t.Fatalf("the right password after %d failures: %d, want 200", i, status)
			}
		}
		if status, _ := login([]*limitsNode{a, b}[i%2], "Wrong horse battery 9"); status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, status)
		}
	}
	for _, node := range []*limitsNode{a, b} {
		status, h := login(node, password)
		if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
			t.Errorf("the right password after %d failures split between the nodes: %d, Retry-After %q; want 429 with Retry-After", limit, status, h.Get("Retry-After"))
		}
	}
}

// nodeLogin is POST /auth/login on node from the nth client address (an
// IPv6 /64 of its own), with a device cookie ("" for none); it returns the
// status, the headers and the device cookie the answer sets ("" for none).
func nodeLogin(t *testing.T, node *limitsNode, n int, cookie, email, password string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, node.url+"/auth/login", strings.NewReader(`{"email": "`+email+`", "password": "`+password+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", fmt.Sprintf("2001:db8:%x::1", n))
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: account.DeviceCookie, Value: cookie})
	}
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	set := ""
	for _, c := range res.Cookies() {
		if c.Name == account.DeviceCookie {
			set = c.Value
		}
	}
	return res.StatusCode, res.Header, set
}

// windowKeys are the keys of scope's windows in the cluster's database
// (the API's in rate_windows, the logins' and reset mails' in
// login_windows).
func windowKeys(t *testing.T, dbURL, scope string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT key FROM rate_windows WHERE scope = $1 UNION ALL SELECT key FROM login_windows WHERE scope = $1", scope)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// wantDigestKeys fails t unless scope has n windows in the database, each
// keyed by a digest of 22 bytes that holds none of clear.
func wantDigestKeys(t *testing.T, dbURL, scope string, n int, clear ...string) {
	t.Helper()
	keys := windowKeys(t, dbURL, scope)
	if len(keys) != n {
		t.Fatalf("%d windows of %s (%q), want %d", len(keys), scope, keys, n)
	}
	for _, k := range keys {
		if len(k) != 22 || slices.ContainsFunc(clear, func(c string) bool { return strings.Contains(k, c) }) {
			t.Errorf("a window of %s is keyed %q, want a digest of 22 bytes that holds none of %q", scope, k, clear)
		}
	}
}

// One client's failed logins of an e-mail address on both nodes are
// counted once toward its share (account.ClientShare): the client
// alternating between the nodes is refused 429 after ClientShare failures,
// not after ClientShare from each node, while another client may still
// try. The share's window is keyed by a digest, not the address or the
// client.
func TestClusterClientShareCountsOnce(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, pacing.Rate{Limit: 1000, Window: time.Hour})
	const email, password = "a@acme.test", "Correct horse battery 9"
	if _, _, _, err := a.accounts.CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: email, Password: password}); err != nil {
		t.Fatal(err)
	}
	nodes := []*limitsNode{a, b}
	for i := range account.ClientShare {
		if status, _, _ := nodeLogin(t, nodes[i%2], 1, "", email, "Wrong horse battery 9"); status != http.StatusUnauthorized {
			t.Fatalf("failure %d of the client: %d, want 401", i+1, status)
		}
	}
	for _, node := range []*limitsNode{a, b} {
		status, h, _ := nodeLogin(t, node, 1, "", email, password)
		if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
			t.Errorf("the client's right password after %d failures split between the nodes: %d, Retry-After %q; want 429 with Retry-After",
				account.ClientShare, status, h.Get("Retry-After"))
		}
	}
	if status, _, _ := nodeLogin(t, b, 2, "", email, password); status != http.StatusOK {
		t.Errorf("another client's right password: %d, want 200", status)
	}
	wantDigestKeys(t, a.dbURL, account.ClientShareScope, 2, email, "2001:db8")
}

// A device cookie's failed logins on both nodes are counted once: past
// account.DeviceFailures of them, however they split between the nodes,
// the cookie counts as none on either node, and with the address's
// failures spent its owner's right password is refused 429. The cookie's
// window is keyed by a digest, not the cookie.
func TestClusterDeviceFailuresCountOnce(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, pacing.Rate{Limit: 1000, Window: time.Hour})
	const email, password = "a@acme.test", "Correct horse battery 9"
	if _, _, _, err := a.accounts.CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: email, Password: password}); err != nil {
		t.Fatal(err)
	}
	status, _, cookie := nodeLogin(t, a, 1, "", email, password)
	if status != http.StatusOK || cookie == "" {
		t.Fatalf("the first login: %d, device cookie %q; want 200 with one", status, cookie)
	}
	nodes := []*limitsNode{a, b}
	for i := range account.DeviceFailures {
		if status, _, _ := nodeLogin(t, nodes[i%2], 1, cookie, email, "Wrong horse battery 9"); status != http.StatusUnauthorized {
			t.Fatalf("failure %d with the cookie: %d, want 401", i+1, status)
		}
	}
	// The address's failures, spent from clients of their own, none with
	// the cookie: the cookie's failures took none of them.
	for i := range account.DefaultLoginRate.Limit {
		if status, _, _ := nodeLogin(t, nodes[i%2], 10+i, "", email, "Wrong horse battery 9"); status != http.StatusUnauthorized {
			t.Fatalf("failure %d of the address: %d, want 401", i+1, status)
		}
	}
	for _, node := range nodes {
		status, h, _ := nodeLogin(t, node, 1, cookie, email, password)
		if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
			t.Errorf("the right password with the cookie after its %d failures split between the nodes: %d, Retry-After %q; want 429 with Retry-After",
				account.DeviceFailures, status, h.Get("Retry-After"))
		}
	}
	wantDigestKeys(t, a.dbURL, account.DeviceScope, 1, cookie, cookie[:16], cookie[len(cookie)-16:])
}

// The failed logins' windows, an address's, a client's share and a device
// cookie's, are deleted by the nodes' sweep once they have ended, and not
// before.
func TestClusterSweepsFailedLogins(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, pacing.Rate{Limit: 1000, Window: time.Hour})
	const email, password = "a@acme.test", "Correct horse battery 9"
	if _, _, _, err := a.accounts.CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: email, Password: password}); err != nil {
		t.Fatal(err)
	}
	_, _, cookie := nodeLogin(t, a, 1, "", email, password)
	if status, _, _ := nodeLogin(t, b, 1, cookie, email, "Wrong horse battery 9"); status != http.StatusUnauthorized {
		t.Fatalf("a wrong password with the cookie: %d, want 401", status)
	}
	if status, _, _ := nodeLogin(t, a, 2, "", email, "Wrong horse battery 9"); status != http.StatusUnauthorized {
		t.Fatalf("a wrong password: %d, want 401", status)
	}
	scopes := []string{account.LoginScope, account.ClientShareScope, account.DeviceScope}
	b.shared.sweep()
	for _, scope := range scopes {
		if keys := windowKeys(t, a.dbURL, scope); len(keys) == 0 {
			t.Fatalf("no window of %s left after a sweep before its end", scope)
		}
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, a.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, table := range []string{"rate_windows", "login_windows"} {
		if _, err := conn.Exec(ctx, "UPDATE "+table+" SET window_end = now() - interval '1 second'"); err != nil {
			t.Fatal(err)
		}
	}
	b.shared.sweep()
	for _, scope := range scopes {
		if keys := windowKeys(t, a.dbURL, scope); len(keys) != 0 {
			t.Errorf("%d windows of %s left after their end and a sweep, want none", len(keys), scope)
		}
	}
}

// A key rotated on one node is refused on the other as soon as the
// rotation answered, although the other had it cached.
func TestClusterRotatedKeyRefusedEverywhere(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t, pacing.Rate{Limit: 1000, Window: time.Hour})
	_, _, oldKey, err := a.accounts.CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: "a@acme.test", Password: "Correct horse battery 9"})
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := nodeCall(t, http.MethodGet, b.url+"/company", oldKey); status != http.StatusOK { // b caches the key
		t.Fatalf("b with the key: %d %s", status, body)
	}
	status, _, body := nodeCall(t, http.MethodPost, a.url+"/account/api-key/rotate", oldKey)
	if status != http.StatusOK {
		t.Fatalf("rotate on a: %d %s", status, body)
	}
	var rotated struct {
		APIKey string `json:"apiKey"`
	}
	if err := json.Unmarshal(body, &rotated); err != nil || rotated.APIKey == "" {
		t.Fatalf("rotate answer %s: %v", body, err)
	}
	if status, _, body := nodeCall(t, http.MethodGet, b.url+"/company", oldKey); status != http.StatusUnauthorized {
		t.Errorf("b with the old key right after the rotation: %d %s, want 401", status, body)
	}
	if status, _, body := nodeCall(t, http.MethodGet, b.url+"/company", rotated.APIKey); status != http.StatusOK {
		t.Errorf("b with the new key: %d %s, want 200", status, body)
	}
}

// When the database does not answer, a request counts in the node's own
// window, not refused with 429 for the server's fault: its headers tell that
// count, and a client over the limit on the node is refused as anywhere.
func TestClusterRateLimitWithoutItsDatabase(t *testing.T) {
	t.Parallel()
	a, _ := twoNodes(t, pacing.Rate{Limit: 3, Window: time.Hour})
	for i := range 3 {
		if status, h, _ := nodeCall(t, http.MethodGet, a.url+"/no-such-route", ""); status != http.StatusNotFound || h.Get("RateLimit-Remaining") != strconv.Itoa(2-i) {
			t.Fatalf("request %d with the database up: %d, remaining %q; want 404 with %d left", i+1, status, h.Get("RateLimit-Remaining"), 2-i)
		}
	}
	if status, _, _ := nodeCall(t, http.MethodGet, a.url+"/no-such-route", ""); status != http.StatusTooManyRequests {
		t.Fatalf("request 4 with the database up: %d, want 429", status)
	}
	a.store.Close()
	for i := range 3 {
		status, h, _ := nodeCall(t, http.MethodGet, a.url+"/no-such-route", "")
		if status != http.StatusNotFound || h.Get("RateLimit-Remaining") != strconv.Itoa(2-i) || h.Get("RateLimit-Limit") != "3" || h.Get("RateLimit-Reset") == "" {
			t.Fatalf("request %d with the database gone: %d, remaining %q of %q, reset %q; want the route's 404 counted in the node's window, %d left",
				i+1, status, h.Get("RateLimit-Remaining"), h.Get("RateLimit-Limit"), h.Get("RateLimit-Reset"), 2-i)
		}
	}
	if status, h, _ := nodeCall(t, http.MethodGet, a.url+"/no-such-route", ""); status != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Fatalf("request 4 with the database gone: %d, Retry-After %q; want 429 from the node's window", status, h.Get("Retry-After"))
	}
}

// loopbackProxies trusts the loopback as the nodes' proxy: a test names
// each request's client address in X-Forwarded-For.
func loopbackProxies() []*net.IPNet {
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	return []*net.IPNet{loopback}
}

// A lone server on PostgreSQL reads a cached API key again after the
// cluster's cache TTL, as a node does: an admin command beside it (a
// company removed, delete-company) takes the key away within it. Without
// it the server kept the key until it restarted.
func TestLoneServerOnPostgreSQLRereadsAPIKeys(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	st, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := testclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	cfg := account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}
	accounts, err := account.New(cfg, st, nil, log, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shareLimits(nil, st, accounts, nil, nil, log); err != nil {
		t.Fatal(err)
	}
	c, _, key, err := accounts.CreateCompany("Acme", account.OwnerInput{FirstName: "A", LastName: "B", Email: "a@acme.test", Password: "Correct horse battery 9"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accounts.Authenticate(context.Background(), key); err != nil { // cached now
		t.Fatal(err)
	}
	conformance.RemoveCompany(t, st, c.ID, 1000)
	clk.Advance(cluster.DefaultCacheTTL)
	if _, err := accounts.Authenticate(context.Background(), key); err == nil {
		t.Fatalf("the key of a removed company still passes %s after", cluster.DefaultCacheTTL)
	}
}
