package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// The cases of TestThreeNodes past the phone's first link.

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleSignIn signs the company's admin in to the console through node s
// and answers a client holding the session: the session is the cluster's,
// so the client's cookie works on every node.
func consoleSignIn(t *testing.T, s *server) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Transport: testhttp.Transport, Jar: jar, Timeout: clusterWait}
	res, err := hc.Get(s.url + "/console/signin")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := csrfInput.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field on the sign-in page (status %d)", res.StatusCode)
	}
	form := url.Values{"csrf": {string(m[1])}, "email": {"you@example.com"}, "password": {"Change-me-123"}}
	req, _ := http.NewRequest("POST", s.url+"/console/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if res, err = hc.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %d %s", res.StatusCode, body)
	}
	return hc
}

func testLiveViewAcrossNodes(t *testing.T, c *cluster3) {
	hc := consoleSignIn(t, c.nodes["a"])
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.nodes["c"].url+"/console/events", nil)
	stream := &http.Client{Transport: testhttp.Transport, Jar: hc.Jar} // the context bounds it
	res, err := stream.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the live view on C: %d", res.StatusCode)
	}
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// The stream's first frame says it is subscribed.
	if l := <-lines; !strings.HasPrefix(l, "retry:") {
		t.Fatalf("the stream began with %q", l)
	}
	l := c.phone.linkTo(t, c.nodes["a"])
	defer l.stop()
	// Sent on A too: this case is about the live view alone, not routing.
	id := c.sendSMS(t, c.nodes["a"], "watched on c", nil)
	// The phone's link on A shows it online on C's pages too (its badge),
	// as a device event on the same stream.
	var online, delivered bool
	for line := range lines {
		online = online || line == `data: {"device":"cluster-phone","online":true}`
		delivered = delivered || strings.Contains(line, `"queue_id":"`+id+`"`) && strings.Contains(line, `"status":"delivered"`)
		if online && delivered {
			return
		}
	}
	t.Fatalf("the live view on C showed %s delivered (reported through A): %v; the phone online on A: %v; within %s", id, delivered, online, clusterWait)
}

// The cluster has no sticky sessions: a plain form post refused on A
// redirects to a page that C may serve, and C shows the error A signed
// (the banner's key is the database's, not each node's own).
func testBannerAcrossNodes(t *testing.T, c *cluster3) {
	hc := consoleSignIn(t, c.nodes["a"])
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := hc.Get(c.nodes["a"].url + "/console/opt-outs")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := csrfInput.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field on the opt-outs page (status %d)", res.StatusCode)
	}
	form := url.Values{"csrf": {string(m[1])}, "phone": {"not a number"}}
	req, _ := http.NewRequest("POST", c.nodes["a"].url+"/console/opt-outs", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if res, err = hc.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	to, err := url.Parse(res.Header.Get("Location"))
	if err != nil || res.StatusCode != http.StatusSeeOther || to.Query().Get("sig") == "" {
		t.Fatalf("the refused post on A: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res, err = hc.Get(c.nodes["c"].url + to.String()); err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(res.Body)
	res.Body.Close()
	msg := to.Query().Get("err")
	if res.StatusCode != http.StatusOK || !strings.Contains(html.UnescapeString(string(page)), `id="err-phone">`+msg+`</span>`) {
		t.Fatalf("C's page shows A's refusal %q nowhere: %d %.1500s", msg, res.StatusCode, page)
	}
}

// A new WhatsApp number may send four a minute (the caps start halved, see
// TestGovernorSurvivesRestart): of nine sends at once, three on each node,
// four are accepted and five refused.
func testCapAcrossNodes(t *testing.T, c *cluster3) {
	reg := pairDevice(t, c.nodes["b"].url, c.apiKey, "cluster-agent")
	waID, _ := announce(t, c.nodes["b"].url, reg, c.apiKey, proto.Hello{WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550002222"}}, IMessage: []proto.IMessageHandle{{Handle: "cluster@example.com"}}})
	var accepted, capped atomic.Int32
	var wg sync.WaitGroup
	for i := range 9 {
		s := c.nodes[string(rune('a'+i%3))]
		wg.Go(func() {
			res, body := post(t, s.url+"/whatsapp/send", c.apiKey, `{"number_id":"`+waID+`","to":"+15551234567","content":"hi"}`)
			switch {
			case res.StatusCode == http.StatusAccepted:
				accepted.Add(1)
			case res.StatusCode == http.StatusTooManyRequests && strings.Contains(string(body), "number_capped"):
				capped.Add(1)
			default:
				t.Errorf("send %d: %d %s", i, res.StatusCode, body)
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 4 || capped.Load() != 5 {
		t.Fatalf("nine sends over three nodes: %d accepted, %d capped; want 4 and 5", accepted.Load(), capped.Load())
	}
}

// deliverySink counts each webhook delivery id, and the events they carry.
type deliverySink struct {
	mu     sync.Mutex
	ids    map[string]int      // X-Service-Delivery -> arrivals
	events map[string][]string // type:queue id -> delivery ids
}

func (h *deliverySink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	id := r.Header.Get("X-Service-Delivery")
	h.mu.Lock()
	h.ids[id]++
	if h.ids[id] == 1 {
		ev := fmt.Sprint(body.Type, ":", body.Data["queue_id"])
		h.events[ev] = append(h.events[ev], id)
	}
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func testWebhooksOnce(t *testing.T, c *cluster3) {
	sink := &deliverySink{ids: map[string]int{}, events: map[string][]string{}}
	hook := httptest.NewServer(sink)
	defer hook.Close()
	if st, body := call(t, "PUT", c.nodes["a"].url+"/webhooks/inbound-sms", c.apiKey, map[string]any{"webhooks": []map[string]any{
		{"url": hook.URL + "/status", "events": []string{"message.sent", "message.delivered"}},
	}}); st != http.StatusOK {
		t.Fatalf("PUT webhooks: %d %v", st, body)
	}
	defer call(t, "PUT", c.nodes["a"].url+"/webhooks/inbound-sms", c.apiKey, map[string]any{"webhooks": []map[string]any{}})
	l := c.phone.linkTo(t, c.nodes["c"])
	defer l.stop()
	var want []string
	for i := range 12 {
		id := c.sendSMS(t, c.nodes[string(rune('a'+i%3))], fmt.Sprint("hooked ", i), nil)
		want = append(want, "message.sent:"+id, "message.delivered:"+id)
	}
	arrived := func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for _, ev := range want {
			if len(sink.events[ev]) == 0 {
				return false
			}
		}
		return true
	}
	waitFor(t, "a delivery of every event", arrived)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for id, n := range sink.ids {
		if n != 1 {
			t.Errorf("delivery %s arrived %d times", id, n)
		}
	}
	for _, ev := range want {
		if ids := sink.events[ev]; len(ids) != 1 {
			t.Errorf("event %s came in %d deliveries %v", ev, len(ids), ids)
		}
	}
}

func testKeyRotation(t *testing.T, c *cluster3) {
	old := c.apiKey
	st, out := call(t, "POST", c.nodes["a"].url+"/account/api-key/rotate", old, nil)
	key, _ := out["apiKey"].(string)
	if st != http.StatusOK || key == "" {
		t.Fatalf("rotate on A: %d %v", st, out)
	}
	c.apiKey = key
	// At once: no wait, no retry.
	if st, _ := get(t, c.nodes["c"].url+"/whatsapp/numbers", old); st != http.StatusUnauthorized {
		t.Errorf("the old key on C right after the rotation: %d, want 401", st)
	}
	if st, _ := get(t, c.nodes["c"].url+"/whatsapp/numbers", key); st != http.StatusOK {
		t.Errorf("the new key on C: %d, want 200", st)
	}
}

// hangingSink holds every webhook attempt the node named node makes before
// cut closes (until its sender goes away), and answers every other attempt:
// the other nodes', and all after the cut. Whose attempt it is, the
// delivery's lease in the database says (leased_by, the holder the node
// registered as its instance), read while the attempt is under way: a node
// leases a delivery before it sends and ends the lease only once the
// attempt is recorded.
type hangingSink struct {
	db   *pgxpool.Pool
	node string
	cut  chan struct{}
	mu   sync.Mutex
	// guarded by mu; by X-Service-Delivery
	held, served map[string]bool
	err          error // the first failed lease look-up
}

func (h *hangingSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := r.Header.Get("X-Service-Delivery")
	select {
	case <-h.cut:
	default:
		var hers bool
		err := h.db.QueryRow(r.Context(), `SELECT EXISTS (SELECT 1 FROM webhook_deliveries d JOIN cluster_nodes n ON n.instance = d.leased_by
			WHERE n.name = $1 AND d.rec->>'uuid' = $2 AND d.leased_until > clock_timestamp())`, h.node, id).Scan(&hers)
		if err != nil {
			h.mu.Lock()
			if r.Context().Err() == nil { // not the sender gone meanwhile
				h.err = cmp.Or(h.err, err)
			}
			h.mu.Unlock()
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if hers {
			h.mu.Lock()
			h.held[id] = true
			h.mu.Unlock()
			select {
			case <-r.Context().Done(): // its node died
			case <-time.After(time.Minute):
			}
			return
		}
	}
	h.mu.Lock()
	h.served[id] = true
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// testKillPhoneNode: the phone is on C; six senders spread a burst over the
// three nodes; C dies (SIGKILL) after 100 answered sends, the senders go on
// on A and B for 100 more; the phone comes back through A (as through a
// load balancer) and must get every answered send. The phone's journal
// dedupes by id: distinct ids are what it sends as SMS, and a job repeated
// on the wire (a job C handed out whose ack died with it) is only logged.
//
// Meanwhile the company's status webhook hangs every attempt C makes before
// the kill, and C is killed only once the receiver holds one of them, so C
// dies holding leases on deliveries: A and B must deliver them within half
// the 60 s lease (the live nodes end a dead node's leases once its beat is
// older than the live window).
func testKillPhoneNode(t *testing.T, c *cluster3) {
	db, err := pgxpool.New(t.Context(), c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sink := &hangingSink{db: db, node: "nc", cut: make(chan struct{}), held: map[string]bool{}, served: map[string]bool{}}
	hook := httptest.NewServer(sink)
	defer hook.Close()
	if st, body := call(t, "PUT", c.nodes["a"].url+"/webhooks/inbound-sms", c.apiKey, map[string]any{"webhooks": []map[string]any{
		{"url": hook.URL + "/status", "events": []string{"message.sent"}},
	}}); st != http.StatusOK {
		t.Fatalf("PUT webhooks: %d %v", st, body)
	}
	defer call(t, "PUT", c.nodes["a"].url+"/webhooks/inbound-sms", c.apiKey, map[string]any{"webhooks": []map[string]any{}})
	onC := c.phone.linkTo(t, c.nodes["c"])
	defer onC.stop()
	var answered sync.Map
	// tries counts the sends tried after the kill: the senders go on
	// before it until C has a webhook attempt under way, which takes the
	// phone's reports of the first sends, so the sends before it are
	// bounded by the waits for it (and each sender's count), not by this.
	var before, after, tries atomic.Int64
	killed, stop := make(chan struct{}), make(chan struct{})
	hc := &http.Client{Transport: testhttp.Transport, Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := 0; i < 20000; i++ {
				names := "abc"
				select {
				case <-stop:
					return
				case <-killed:
					names = "ab"
					if tries.Add(1) > 3000 {
						return
					}
				default:
				}
				s := c.nodes[string(names[(w+i)%len(names)])]
				body := fmt.Sprintf(`{"device_fingerprint":"cluster-phone","phone":"+15551234567","message":"burst %d-%d"}`, w, i)
				req, _ := http.NewRequest("POST", s.url+"/chat/send", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+c.apiKey)
				req.Header.Set("Content-Type", "application/json")
				res, err := hc.Do(req)
				if err != nil {
					continue // C died under this send: not answered, not counted
				}
				var ans struct{ QueueID string }
				_ = json.NewDecoder(res.Body).Decode(&ans)
				res.Body.Close()
				if (res.StatusCode == http.StatusOK || res.StatusCode == http.StatusAccepted) && ans.QueueID != "" {
					answered.Store(ans.QueueID, s.url)
					select {
					case <-killed:
						after.Add(1)
					default:
						before.Add(1)
					}
				}
			}
		})
	}
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt()
	waitFor(t, "100 answered sends before the kill", func() bool { return before.Load() >= 100 })
	waitFor(t, "a webhook attempt of C's in the receiver's hands", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if sink.err != nil {
			t.Fatalf("the receiver could not read a delivery's lease: %v", sink.err)
		}
		return len(sink.held) > 0
	})
	if err := c.nodes["c"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	close(killed)
	_ = c.nodes["c"].cmd.Wait()
	killedAt := time.Now()
	// From here every attempt is answered: what C held is what it died
	// with, and A and B take it over.
	close(sink.cut)
	waitFor(t, "100 answered sends after the kill", func() bool { return after.Load() >= 100 })
	halt()
	onC.stop()

	onA := c.phone.linkTo(t, c.nodes["a"])
	defer onA.stop()
	missing := func() (ids []string) {
		for id := range answered.Range {
			if !c.phone.got(id.(string)) {
				ids = append(ids, id.(string))
			}
		}
		return ids
	}
	deadline := time.Now().Add(2 * clusterWait)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	n := 0
	answered.Range(func(_, _ any) bool { n++; return true })
	c.phone.mu.Lock()
	dups := 0
	for _, k := range c.phone.wire {
		dups += k - 1
	}
	c.phone.mu.Unlock()
	t.Logf("kill -9: %d sends answered (%d before the kill), %d jobs repeated on the wire (absorbed by the phone's journal)", n, before.Load(), dups)
	if m := missing(); len(m) > 0 {
		first, _ := answered.Load(m[0])
		t.Fatalf("%d of %d answered sends never reached the phone after the kill (e.g. %s, answered by %s)", len(m), n, m[0], first)
	}

	unserved := func() (ids []string) {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for id := range sink.held {
			if !sink.served[id] {
				ids = append(ids, id)
			}
		}
		return ids
	}
	for len(unserved()) > 0 && time.Since(killedAt) < 30*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	sink.mu.Lock()
	held := len(sink.held)
	sink.mu.Unlock()
	if u := unserved(); len(u) > 0 {
		t.Fatalf("%d of the %d deliveries held at the kill were not delivered by the live nodes within 30 s (the lease is 60 s): %v", len(u), held, u)
	}
	t.Logf("kill -9: %d webhook deliveries held by the dead node delivered %s after the kill", held, time.Since(killedAt).Round(100*time.Millisecond))
}
