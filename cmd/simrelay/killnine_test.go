package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gomail "github.com/wneessen/go-mail"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/freeport"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// killPhone is a phone of the kill test: one client.Phone for the whole
// test (its journal and unacked reports and inbound live on across the
// server's restarts, as a real phone's do), linked to the fixed address.
type killPhone struct {
	fp    string
	phone *client.Phone
	mu    sync.Mutex
	jobs  map[string]int      // job id -> times handed to the phone
	texts map[string][]string // text -> distinct job ids that carried it
}

func (k *killPhone) job(s proto.Send) {
	k.mu.Lock()
	k.jobs[s.ID]++
	if !slices.Contains(k.texts[s.Message], s.ID) {
		k.texts[s.Message] = append(k.texts[s.Message], s.ID)
	}
	k.mu.Unlock()
	// Half the outcomes come later, so that kills land between a job's
	// ack and its reports too.
	report := func() {
		k.phone.Report(s.ID, proto.StatusSent, "")
		k.phone.Report(s.ID, proto.StatusDelivered, "")
	}
	if rand.IntN(2) == 0 {
		report()
		return
	}
	time.AfterFunc(time.Duration(rand.IntN(300))*time.Millisecond, report)
}

// killSink is the webhook receiver: each delivery id with the hash of
// its body, and what the events say.
type killSink struct {
	mu       sync.Mutex
	bodies   map[string][32]byte // X-Service-Delivery -> body hash
	unstable []string            // delivery ids seen with two bodies
	received map[string]bool     // sms.received: message text
	status   map[string]bool     // type:queue_id
	// what each event is about (type and queue id or text) -> its distinct
	// delivery ids: more than one is an event made twice, not a redelivery
	about map[string]map[string]bool
	hits  int
	// per receiver path ("/in-b"...): event id -> body length, and
	// distinct delivery ids
	events     map[string]map[string]int
	deliveries map[string]map[string]bool
}

func (h *killSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var ev struct {
		ID   string         `json:"id"`
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	_ = json.Unmarshal(raw, &ev)
	sum := sha256.Sum256(raw)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hits++
	id := r.Header.Get("X-Service-Delivery")
	if old, ok := h.bodies[id]; ok && old != sum {
		h.unstable = append(h.unstable, id)
	}
	h.bodies[id] = sum
	if h.events[r.URL.Path] == nil {
		h.events[r.URL.Path], h.deliveries[r.URL.Path] = map[string]int{}, map[string]bool{}
	}
	// The store keeps the body without the delivery id
	// ("id":"...", first): what the budget counted.
	h.events[r.URL.Path][ev.ID] = len(raw) - len(`"id":"`+ev.ID+`",`)
	h.deliveries[r.URL.Path][id] = true
	what := ev.Type + ":" + fmt.Sprint(ev.Data["queue_id"])
	if ev.Type == "sms.received" {
		what = ev.Type + ":" + fmt.Sprint(ev.Data["message"])
	}
	if h.about[what] == nil {
		h.about[what] = map[string]bool{}
	}
	h.about[what][id] = true
	switch ev.Type {
	case "sms.received":
		h.received[fmt.Sprint(ev.Data["message"])] = true
	default:
		h.status[ev.Type+":"+fmt.Sprint(ev.Data["queue_id"])] = true
	}
	w.WriteHeader(http.StatusNoContent)
}

// sent is a send answered 2xx: where it must arrive.
type sent struct {
	fp   string // "" for a pool send: either member
	text string
	key  string // its Idempotency-Key, if any
	body map[string]any
}

// TestKillNineUnderMixedLoad kills the server with SIGKILL at random
// moments of a mixed load (single sends with and without an
// Idempotency-Key, bulk and pool sends, scheduled sends, inbound from
// phones, status reports, webhook deliveries, a company's removal and a
// device's deletion), restarts it on the same store each time, and checks
// after every restart and at the end what PROTOCOL.md and docs/api.md
// promise: every send answered 2xx exists and reaches its phone (or ends
// failed device_deleted), a retried key answers the same message, no text
// reaches a phone under two ids, every inbound the phone saw acked exists
// once, every webhook delivery id keeps its body, the removal finishes,
// and the counters agree with the records. It runs with
// SIMRELAY_KILLNINE=1 (SIMRELAY_KILLNINE_KILLS kills, 20 by default).
func TestKillNineUnderMixedLoad(t *testing.T) {
	if os.Getenv("SIMRELAY_KILLNINE") == "" {
		t.Skip("SIMRELAY_KILLNINE=1 runs the kill -9 soak (about a minute a store)")
	}
	kills := 20
	if n, err := fmt.Sscan(os.Getenv("SIMRELAY_KILLNINE_KILLS"), &kills); n != 1 || err != nil {
		kills = 20
	}
	bin, st, keyA := companyStore(t)
	keyB := createCompanyAs(t, bin, st, "Beta", "b@example.com")
	keyC := createCompanyAs(t, bin, st, "Gamma", "c@example.com")
	addr := freeport.Addr(t)
	sink := &killSink{bodies: map[string][32]byte{}, received: map[string]bool{}, status: map[string]bool{}, events: map[string]map[string]int{}, about: map[string]map[string]bool{}, deliveries: map[string]map[string]bool{}}
	hook := httptest.NewServer(sink)
	t.Cleanup(hook.Close)
	certFile, keyFile, clientTLS := smtpCert(t)
	smtpAddr := freeport.Addr(t)
	flags := []string{"--listen", addr, "--rate-general", "1000000/1m", "--rate-auth", "1000/1m", "--rate-login", "1000/1m", "--webhook-allow-private",
		"--smtp-listen", smtpAddr, "--smtp-domain", "sms.test", "--smtp-cert", certFile, "--smtp-key", keyFile}
	var runs []*server
	start := func() *server {
		t.Helper()
		s := startServer(t, bin, st, flags...)
		runs = append(runs, s)
		return s
	}
	srv := start()
	base := srv.url

	// Setup: webhooks, devices, a pool, sends to a device that never links.
	for name, key := range map[string]string{"a": keyA, "b": keyB} {
		if code, body := call(t, "PUT", base+"/webhooks/inbound-sms", key, map[string]any{"webhooks": []map[string]any{
			{"url": hook.URL + "/in-" + name},
			{"url": hook.URL + "/status-" + name, "events": []string{"message.sent", "message.delivered", "message.failed"}},
		}}); code != 200 {
			t.Fatalf("PUT webhooks: %d %v", code, body)
		}
	}
	phones := map[string]*killPhone{}
	keyOf := map[string]string{"a1": keyA, "a2": keyA, "b1": keyB, "c1": keyC}
	for _, fp := range []string{"a1", "a2", "b1", "c1"} {
		reg := pairDevice(t, base, keyOf[fp], fp)
		k := &killPhone{fp: fp, jobs: map[string]int{}, texts: map[string][]string{}}
		k.phone = client.New(client.Config{WSURL: "ws://" + addr + "/device/ws", Token: reg.DeviceToken,
			BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond, OnJob: k.job})
		phones[fp] = k
	}
	pairDevice(t, base, keyA, "doomed")
	if code, body := call(t, "POST", base+"/pools", keyA, map[string]any{"name": "P", "members": []map[string]any{{"device_fingerprint": "a1"}, {"device_fingerprint": "a2"}}}); code != 201 {
		t.Fatalf("POST /pools: %d %v", code, body)
	}
	const doomedSends = 20
	var doomed []string
	for i := range doomedSends {
		code, body := call(t, "POST", base+"/chat/send", keyA, map[string]any{"device_fingerprint": "doomed", "phone": "+15550009999", "message": fmt.Sprint("doomed-", i)})
		if code != 200 {
			t.Fatalf("send to doomed: %d %v", code, body)
		}
		doomed = append(doomed, body["queueId"].(string))
	}
	// C holds enough for its removal to take several steps.
	var gammaIDs []string
	for i := range 5 {
		var msgs []map[string]any
		for j := range 1000 {
			msgs = append(msgs, map[string]any{"phone": fmt.Sprintf("+1555088%04d", j), "message": fmt.Sprint("gamma-", i, "-", j)})
		}
		code, body := call(t, "POST", base+"/chat/send-bulk", keyC, map[string]any{"device_fingerprint": "c1", "messages": msgs})
		if code != 200 {
			t.Fatalf("bulk of C: %d %v", code, body)
		}
		for _, id := range body["queueIds"].([]any) {
			gammaIDs = append(gammaIDs, id.(string))
		}
	}
	// What C holds, read from the store with the server killed: after its
	// removal none of it may be left.
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()
	gamma := readFilled(t, st, "c@example.com", "c1", gammaIDs)
	srv = start()

	ctx, cancel := context.WithCancel(context.Background())
	var phoneWG sync.WaitGroup
	for _, k := range phones {
		phoneWG.Go(func() { _ = k.phone.Run(ctx) })
	}
	defer func() { cancel(); phoneWG.Wait() }()

	var mu sync.Mutex
	answered := map[string]sent{}    // queue id -> send, company A and B
	companyOf := map[string]string{} // queue id -> key
	pendingKeys := map[string]sent{} // Idempotency-Key -> send not answered (cut by a kill)
	type keyedBulk struct {
		body map[string]any
		ids  []any // the answer's queueIds, once answered
	}
	bulkKeys := map[string]*keyedBulk{} // Idempotency-Key of a bulk send
	keyed := map[string]string{}        // Idempotency-Key -> queue id answered
	inbound := map[string]proto.Inbound{}
	var mailed []string       // texts of mails answered 250
	var inboundAcked sync.Map // client id -> uuid
	var seq atomic.Int64
	var vpOn atomic.Bool // the virtual phone paired: sends to it may start
	hc := &http.Client{Transport: testhttp.Transport, Timeout: 5 * time.Second}
	do := func(key, path, idem string, body map[string]any) (int, map[string]any, error) {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", "http://"+addr+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		if idem != "" {
			req.Header.Set("Idempotency-Key", idem)
		}
		res, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out, nil
	}
	record := func(key, id string, s sent) {
		mu.Lock()
		answered[id] = s
		companyOf[id] = key
		mu.Unlock()
	}
	unexpected := func(what string, code int, body map[string]any, err error) {
		if err == nil && code != 0 {
			t.Errorf("%s: %d %v", what, code, body)
		}
	}
	// One load worker each; each returns when ctx ends.
	load := func(ctx context.Context) *sync.WaitGroup {
		var wg sync.WaitGroup
		loop := func(f func()) {
			wg.Go(func() {
				for ctx.Err() == nil {
					f()
				}
			})
		}
		loop(func() { // A: single sends, no key
			n := seq.Add(1)
			b := map[string]any{"device_fingerprint": "a1", "phone": fmt.Sprintf("+1555100%04d", n%7), "message": fmt.Sprint("A-single-", n)}
			code, body, err := do(keyA, "/chat/send", "", b)
			if code == 200 {
				record(keyA, body["queueId"].(string), sent{fp: "a1", text: b["message"].(string)})
			} else {
				unexpected("single send", code, body, err)
			}
		})
		loop(func() { // A: single sends under a key
			n := seq.Add(1)
			k := fmt.Sprint("key-", n)
			b := map[string]any{"device_fingerprint": "a2", "phone": fmt.Sprintf("+1555200%04d", n%5), "message": fmt.Sprint("A-keyed-", n)}
			s := sent{fp: "a2", text: b["message"].(string), key: k, body: b}
			mu.Lock()
			pendingKeys[k] = s
			mu.Unlock()
			code, body, err := do(keyA, "/chat/send", k, b)
			if code == 200 {
				id := body["queueId"].(string)
				record(keyA, id, s)
				mu.Lock()
				delete(pendingKeys, k)
				keyed[k] = id
				mu.Unlock()
			} else {
				unexpected("keyed send", code, body, err)
			}
		})
		loop(func() { // A: bulk sends of 5
			n := seq.Add(1)
			var msgs []map[string]any
			for i := range 5 {
				msgs = append(msgs, map[string]any{"phone": fmt.Sprintf("+1555300%04d", i), "message": fmt.Sprintf("A-bulk-%d-%d", n, i)})
			}
			code, body, err := do(keyA, "/chat/send-bulk", "", map[string]any{"device_fingerprint": "a1", "messages": msgs})
			if code == 200 {
				ids, _ := body["queueIds"].([]any)
				if len(ids) != 5 {
					t.Errorf("bulk answered %v", body)
				}
				for i, id := range ids {
					record(keyA, id.(string), sent{fp: "a1", text: msgs[i]["message"].(string)})
				}
			} else {
				unexpected("bulk send", code, body, err)
			}
		})
		loop(func() { // A: bulk sends of 3 under a key
			n := seq.Add(1)
			k := fmt.Sprint("bulk-key-", n)
			var msgs []map[string]any
			for i := range 3 {
				msgs = append(msgs, map[string]any{"phone": fmt.Sprintf("+1555310%04d", i), "message": fmt.Sprintf("A-keyedbulk-%d-%d", n, i)})
			}
			kb := &keyedBulk{body: map[string]any{"device_fingerprint": "a2", "messages": msgs}}
			mu.Lock()
			bulkKeys[k] = kb
			mu.Unlock()
			code, body, err := do(keyA, "/chat/send-bulk", k, kb.body)
			if code == 200 {
				ids, _ := body["queueIds"].([]any)
				for i, id := range ids {
					record(keyA, id.(string), sent{fp: "a2", text: msgs[i]["message"].(string)})
				}
				mu.Lock()
				kb.ids = ids
				mu.Unlock()
			} else {
				unexpected("keyed bulk send", code, body, err)
			}
		})
		loop(func() { // A: pool sends
			n := seq.Add(1)
			b := map[string]any{"pool": "P", "phone": fmt.Sprintf("+1555400%04d", n%3), "message": fmt.Sprint("A-pool-", n)}
			code, body, err := do(keyA, "/chat/send", "", b)
			if code == 200 {
				record(keyA, body["queueId"].(string), sent{text: b["message"].(string)})
			} else {
				unexpected("pool send", code, body, err)
			}
		})
		loop(func() { // A: scheduled a second or two ahead
			n := seq.Add(1)
			at := time.Now().Add(time.Duration(500+rand.IntN(1500)) * time.Millisecond).UTC().Format(time.RFC3339Nano)
			b := map[string]any{"device_fingerprint": "a2", "phone": "+15555000000", "message": fmt.Sprint("A-later-", n), "send_at": at}
			code, body, err := do(keyA, "/chat/send", "", b)
			if code == 200 {
				record(keyA, body["queueId"].(string), sent{fp: "a2", text: b["message"].(string)})
			} else {
				unexpected("scheduled send", code, body, err)
			}
			time.Sleep(20 * time.Millisecond)
		})
		loop(func() { // B: single sends
			n := seq.Add(1)
			b := map[string]any{"device_fingerprint": "b1", "phone": fmt.Sprintf("+1555600%04d", n%4), "message": fmt.Sprint("B-single-", n)}
			code, body, err := do(keyB, "/chat/send", "", b)
			if code == 200 {
				record(keyB, body["queueId"].(string), sent{fp: "b1", text: b["message"].(string)})
			} else {
				unexpected("B send", code, body, err)
			}
		})
		loop(func() { // A: mail to SMS through a1
			n := seq.Add(1)
			text := fmt.Sprint("A-mail-", n)
			host, port, _ := strings.Cut(smtpAddr, ":")
			p, _ := strconv.Atoi(port)
			c, err := gomail.NewClient(host, gomail.WithPort(p), gomail.WithTLSPolicy(gomail.TLSMandatory), gomail.WithTLSConfig(clientTLS),
				gomail.WithSMTPAuth(gomail.SMTPAuthPlain), gomail.WithUsername(keyA), gomail.WithPassword("x"), gomail.WithTimeout(5*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			m := gomail.NewMsg()
			_ = m.From("app@example.com")
			_ = m.To(fmt.Sprintf("+1555900%04d+dev-a1@sms.test", n%3))
			m.SetBodyString(gomail.TypeTextPlain, text)
			if err := c.DialAndSend(m); err == nil {
				mu.Lock()
				mailed = append(mailed, text)
				mu.Unlock()
			}
		})
		loop(func() { // B: sends to the virtual phone, once it paired
			if !vpOn.Load() {
				time.Sleep(20 * time.Millisecond)
				return
			}
			n := seq.Add(1)
			b := map[string]any{"device_fingerprint": "virtual-phone", "phone": fmt.Sprintf("+1555610%04d", n%4), "message": fmt.Sprint("B-vp-", n)}
			code, body, err := do(keyB, "/chat/send", "", b)
			if code == 200 {
				record(keyB, body["queueId"].(string), sent{fp: "virtual-phone", text: b["message"].(string)})
			} else {
				unexpected("send to the virtual phone", code, body, err)
			}
		})
		loop(func() { // inbound from a1 and b1
			n := seq.Add(1)
			fp := []string{"a1", "b1"}[n%2]
			in := proto.Inbound{ClientID: fmt.Sprint("in-", n), From: fmt.Sprintf("+1555700%04d", n%3), Message: fmt.Sprint("inbound-", fp, "-", n), SIMSlot: "SIM1", ReceivedAt: time.Now().UTC().Format("2006-01-02T15:04:05.000Z")}
			mu.Lock()
			inbound[fp+"/"+in.ClientID] = in
			mu.Unlock()
			ack := phones[fp].phone.Receive(in)
			select {
			case a := <-ack:
				inboundAcked.Store(fp+"/"+in.ClientID, a)
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		})
		return &wg
	}

	// checkAnswered: every send answered 2xx before the kill is there.
	var checked int
	checkAnswered := func(url string) {
		t.Helper()
		mu.Lock()
		var ids []string
		for id := range answered {
			ids = append(ids, id)
		}
		mu.Unlock()
		slices.Sort(ids)
		for _, id := range ids {
			code, body := call(t, "GET", url+"/chat/queue/"+id, companyOf[id], nil)
			if code != 200 {
				t.Errorf("answered send %s after a restart: %d %v", id, code, body)
			}
		}
		checked = len(ids)
	}
	// retryKeys: a key whose answer a kill cut is retried until answered;
	// an answered key, retried, answers the same message.
	retryKeys := func(url string) {
		t.Helper()
		mu.Lock()
		pend := make(map[string]sent, len(pendingKeys))
		for k, s := range pendingKeys {
			pend[k] = s
		}
		var some []string
		for k := range keyed {
			if len(some) < 20 {
				some = append(some, k)
			}
		}
		mu.Unlock()
		for k, s := range pend {
			code, body := callKeyed(t, url+"/chat/send", keyA, k, s.body)
			if code != 200 {
				t.Errorf("retry of key %s: %d %v", k, code, body)
				continue
			}
			record(keyA, body["queueId"].(string), s)
			mu.Lock()
			delete(pendingKeys, k)
			keyed[k] = body["queueId"].(string)
			mu.Unlock()
		}
		// Keyed bulk sends: a cut one is answered now, an answered one
		// answers the same ids again.
		mu.Lock()
		bulks := map[string]*keyedBulk{}
		for k, kb := range bulkKeys {
			bulks[k] = kb
		}
		mu.Unlock()
		for k, kb := range bulks {
			code, body := callKeyed(t, url+"/chat/send-bulk", keyA, k, kb.body)
			ids, _ := body["queueIds"].([]any)
			if code != 200 || len(ids) != 3 {
				t.Errorf("keyed bulk %s again: %d %v", k, code, body)
				continue
			}
			mu.Lock()
			if kb.ids == nil {
				kb.ids = ids
				msgs := kb.body["messages"].([]map[string]any)
				for i, id := range ids {
					answered[id.(string)] = sent{fp: "a2", text: msgs[i]["message"].(string)}
					companyOf[id.(string)] = keyA
				}
			} else if !slices.Equal(kb.ids, ids) {
				t.Errorf("keyed bulk %s again: ids %v, first answered %v", k, ids, kb.ids)
			}
			delete(bulkKeys, k) // checked once after the kill that followed it
			mu.Unlock()
		}
		for _, k := range some {
			mu.Lock()
			s, want := answered[keyed[k]], keyed[k]
			mu.Unlock()
			code, body := callKeyed(t, url+"/chat/send", keyA, k, s.body)
			if code != 200 || body["queueId"] != want {
				t.Errorf("replay of key %s: %d %v, want queueId %s", k, code, body, want)
			}
		}
	}

	// B's second phone is the README's virtual phone, a process of its own
	// that follows the server across the last kills (started earlier, its
	// reconnect backoff, PROTOCOL.md section 14, would keep it away for
	// minutes after twenty restarts in a minute, as it would a real phone).
	vpOut := &syncbuf.Buffer{}
	vp := exec.Command(bin, "phone", "--server", "http://"+addr, "--api-key", keyB, "--token-file", filepath.Join(t.TempDir(), "phone.json"))
	vp.Stdout, vp.Stderr = vpOut, vpOut
	vpAt := max(0, kills-3)
	removalAt, deletionAt := kills/4, kills/2
	for i := range kills {
		lctx, stop := context.WithCancel(ctx)
		wg := load(lctx)
		if i == vpAt {
			if err := vp.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = vp.Process.Kill(); _ = vp.Wait() })
			poll.Within(t, 30*time.Second, "the virtual phone connects", func() bool { return strings.Contains(vpOut.String(), "connected") })
			vpOn.Store(true)
		}
		switch i {
		case removalAt: // the kill lands soon after the 202
			closeCompany(t, srv.url, "c@example.com", "Gamma")
		case deletionAt:
			if code, body := call(t, "DELETE", srv.url+"/device/delete/doomed", keyA, nil); code != 200 {
				t.Errorf("DELETE doomed: %d %v", code, body)
			}
		}
		pause := time.Duration(20+rand.IntN(800)) * time.Millisecond
		if i == removalAt {
			pause = time.Duration(rand.IntN(20)) * time.Millisecond
		}
		time.Sleep(pause)
		if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = srv.cmd.Wait()
		stop()
		wg.Wait()
		srv = start()
		checkAnswered(srv.url)
		retryKeys(srv.url)
	}
	t.Logf("%d kills; %d sends answered and found after the last", kills, checked)

	// The end: every answered send reaches its phone, every report and
	// inbound is acked, webhooks catch up.
	mu.Lock()
	all := slices.Sorted(maps.Keys(answered))
	mu.Unlock()
	poll.Within(t, 120*time.Second, "every answered send reaches its phone and every report and inbound is acked", func() bool {
		for _, k := range phones {
			if k.fp != "c1" && k.phone.Pending() > 0 {
				return false
			}
		}
		vpLines := vpOut.String()
		for _, id := range all {
			s := answered[id]
			if s.fp == "virtual-phone" {
				if !strings.Contains(vpLines, "job "+id+": reported sent, then delivered") {
					return false
				}
				continue
			}
			if s.fp == "" {
				if !phones["a1"].has(id) && !phones["a2"].has(id) {
					return false
				}
			} else if !phones[s.fp].has(id) {
				return false
			}
		}
		return true
	})
	// Statuses: delivered for every answered send, failed for the doomed.
	// The virtual phone may still wait to link again (its backoff grew
	// over the kills), with reports a kill cut: they come on its next link.
	notYet := slices.Clone(all)
	for deadline := time.Now().Add(120 * time.Second); len(notYet) > 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		notYet = slices.DeleteFunc(notYet, func(id string) bool {
			code, body := call(t, "GET", srv.url+"/chat/queue/"+id, companyOf[id], nil)
			return code == 200 && body["status"] == "delivered"
		})
	}
	for _, id := range all {
		code, body := call(t, "GET", srv.url+"/chat/queue/"+id, companyOf[id], nil)
		if code != 200 || body["status"] != "delivered" {
			t.Errorf("send %s (%s): %d %v, want delivered", id, answered[id].text, code, body)
			for line := range strings.SplitSeq(vpOut.String(), "\n") {
				if strings.Contains(line, id) {
					t.Logf("  virtual phone: %s", line)
				}
			}
			for i, r := range runs {
				for line := range strings.SplitSeq(r.stderr.String(), "\n") {
					if strings.Contains(line, id) || strings.Contains(line, "virtual-phone") {
						t.Logf("  run %d: %s", i, line)
					}
				}
			}
		}
	}
	for _, id := range doomed {
		if code, body := call(t, "GET", srv.url+"/chat/queue/"+id, keyA, nil); code != 200 || body["status"] != "failed" || body["error"] != "device_deleted" {
			t.Errorf("send %s to the deleted device: %d %v, want failed device_deleted", id, code, body)
		}
	}
	poll.Within(t, 60*time.Second, "message.failed events of the deleted device's sends", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for _, id := range doomed {
			if !sink.status["message.failed:"+id] {
				return false
			}
		}
		return true
	})
	// No text reached a phone under two ids (a job sent again under its
	// id is taken once: the phone's journal, as PROTOCOL.md asks).
	jobsA := 0
	for _, k := range phones {
		k.mu.Lock()
		for text, ids := range k.texts {
			if len(ids) > 1 {
				t.Errorf("phone %s got %q under %d ids: %v", k.fp, text, len(ids), ids)
			}
		}
		if k.fp == "a1" || k.fp == "a2" {
			jobsA += len(k.jobs)
		}
		k.mu.Unlock()
	}
	// Every inbound the phone was given is acked now (the phone resends
	// until then) and exists once.
	poll.Within(t, 60*time.Second, "every inbound acked", func() bool {
		for _, fp := range []string{"a1", "b1"} {
			if phones[fp].phone.Pending() > 0 {
				return false
			}
		}
		return true
	})
	wantIn := map[string]map[string]int{} // fp/from -> text -> 0
	for key, in := range inbound {
		fp, _, _ := strings.Cut(key, "/")
		if wantIn[fp+"/"+in.From] == nil {
			wantIn[fp+"/"+in.From] = map[string]int{}
		}
		wantIn[fp+"/"+in.From][in.Message] = 0
	}
	inboundA := 0
	for conv, texts := range wantIn {
		fp, from, _ := strings.Cut(conv, "/")
		for _, m := range history(t, srv.url, keyOf[fp], fp, from) {
			if m.Direction != "inbound" {
				continue
			}
			if _, ok := texts[m.Message]; !ok {
				t.Errorf("inbound %q in %s's history was never given", m.Message, conv)
				continue
			}
			texts[m.Message]++
		}
		for text, n := range texts {
			if n != 1 {
				t.Errorf("inbound %q of %s: stored %d times, want once", text, conv, n)
			}
			if fp == "a1" {
				inboundA++
			}
		}
	}
	// Webhooks: a delivery id keeps its body; every delivered send and
	// every inbound has its event.
	var delivered []string // every job a phone of A or B took, answered or not
	for _, fp := range []string{"a1", "a2", "b1"} {
		phones[fp].mu.Lock()
		for id := range phones[fp].jobs {
			delivered = append(delivered, id)
		}
		phones[fp].mu.Unlock()
	}
	poll.Within(t, 120*time.Second, "webhook events of every delivered send", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for _, id := range delivered {
			if !sink.status["message.delivered:"+id] || !sink.status["message.sent:"+id] {
				return false
			}
		}
		return true
	})
	poll.Within(t, 60*time.Second, "webhook events of every inbound", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for _, in := range inbound {
			if !sink.received[in.Message] {
				return false
			}
		}
		return true
	})
	// Every mail answered 250 reached a1, under one id.
	for _, text := range mailed {
		phones["a1"].mu.Lock()
		ids := phones["a1"].texts[text]
		phones["a1"].mu.Unlock()
		if len(ids) != 1 {
			t.Errorf("mail %q reached a1 under %d ids, want 1", text, len(ids))
		}
	}
	sink.mu.Lock()
	if len(sink.unstable) > 0 {
		t.Errorf("%d webhook delivery ids came with two bodies: %v", len(sink.unstable), sink.unstable[:min(5, len(sink.unstable))])
	}
	twice := 0
	for what, ids := range sink.about {
		if len(ids) > 1 {
			if twice++; twice <= 5 {
				t.Errorf("webhook event %s was made %d times (delivery ids %v), want once", what, len(ids), ids)
			}
		}
	}
	hits, distinct := sink.hits, len(sink.bodies)
	sink.mu.Unlock()

	// Counters of company A against its records.
	code, body := call(t, "GET", srv.url+"/dashboard/summary", keyA, nil)
	if code != 200 || int(body["totalMessagesSent"].(float64)) != jobsA {
		t.Errorf("dashboard totalMessagesSent: %d %v, want %d (distinct jobs the phones of A took)", code, body["totalMessagesSent"], jobsA)
	}
	code, body = call(t, "GET", srv.url+"/analytics", keyA, nil)
	totals, _ := body["totals"].(map[string]any)
	if code != 200 || int(totals["sent"].(float64)) != jobsA || int(totals["delivered"].(float64)) != jobsA ||
		int(totals["failed"].(float64)) != doomedSends || int(totals["received"].(float64)) != inboundA {
		t.Errorf("analytics totals: %d %v, want sent=delivered=%d failed=%d received=%d", code, totals, jobsA, doomedSends, inboundA)
	}
	code, body = call(t, "GET", srv.url+"/billing/subscription", keyA, nil)
	usage, _ := body["usage"].(map[string]any)
	if code != 200 || int(usage["messages_this_period"].(float64)) != jobsA+doomedSends {
		t.Errorf("usage: %d %v, want messages_this_period %d", code, usage, jobsA+doomedSends)
	}
	// The virtual phone's jobs, from its output: each text under one id.
	vpTexts := map[string][]string{}
	for _, m := range regexp.MustCompile(`job (\S+): sms to \S+ from \S+: "(B-vp-\d+)"`).FindAllStringSubmatch(vpOut.String(), -1) {
		if !slices.Contains(vpTexts[m[2]], m[1]) {
			vpTexts[m[2]] = append(vpTexts[m[2]], m[1])
		}
	}
	for text, ids := range vpTexts {
		if len(ids) > 1 {
			t.Errorf("the virtual phone got %q under %d ids: %v", text, len(ids), ids)
		}
	}
	phones["b1"].mu.Lock()
	jobsB := len(phones["b1"].jobs) + len(vpTexts)
	phones["b1"].mu.Unlock()
	inboundB := 0
	for key := range inbound {
		if strings.HasPrefix(key, "b1/") {
			inboundB++
		}
	}
	code, body = call(t, "GET", srv.url+"/analytics", keyB, nil)
	totals, _ = body["totals"].(map[string]any)
	if code != 200 || int(totals["sent"].(float64)) != jobsB || int(totals["delivered"].(float64)) != jobsB || int(totals["received"].(float64)) != inboundB {
		t.Errorf("analytics totals of B: %d %v, want sent=delivered=%d received=%d", code, totals, jobsB, inboundB)
	}
	code, body = call(t, "GET", srv.url+"/billing/subscription", keyB, nil)
	usage, _ = body["usage"].(map[string]any)
	if code != 200 || int(usage["messages_this_period"].(float64)) != jobsB {
		t.Errorf("usage of B: %d %v, want messages_this_period %d", code, usage, jobsB)
	}
	if code, body := get(t, srv.url+"/company", keyC); code != http.StatusUnauthorized {
		t.Errorf("the removed company's key: %d %s, want 401", code, body)
	}
	_ = srv.cmd.Process.Kill()
	_ = srv.cmd.Wait()

	// The removal finished: nothing of C is left.
	b := openTestBackend(t, st)
	defer b.Close()
	if ids, err := b.ClosingCompanies(); err != nil || len(ids) != 0 {
		t.Errorf("closing companies after the run: %v (%v), want none", ids, err)
	}
	if _, err := b.UserByEmail("c@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the removed company's admin: %v, want ErrNotFound", err)
	}
	checkRemoved(t, b, gamma)
	removedIn := -1
	for i, r := range runs {
		if strings.Contains(r.stderr.String(), "company removed") {
			removedIn = i
		}
	}
	t.Logf("company C closed in run %d, its removal logged finished in run %d", removalAt+1, removedIn)
	// The storage budget counted each stored message of B (its only
	// other writes: a pairing code and the webhook events).
	used, err := b.StorageUsed(gammaFree(b, t, "b@example.com"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var msgCost int64
	phones["b1"].mu.Lock()
	for text := range phones["b1"].texts {
		msgCost += int64(len(text)+len("+15556000000")) + store.MessageRowCost
	}
	phones["b1"].mu.Unlock()
	for text := range vpTexts {
		msgCost += int64(len(text)+len("+15556100000")) + store.MessageRowCost
	}
	for key, in := range inbound {
		if strings.HasPrefix(key, "b1/") {
			msgCost += store.MessageCost(store.Message{Text: in.Message, Phone: in.From, ClientID: in.ClientID, ReceivedAt: in.ReceivedAt})
		}
	}
	var hookCost int64
	sink.mu.Lock()
	for _, path := range []string{"/in-b", "/status-b"} {
		for _, n := range sink.events[path] {
			hookCost += int64(n)
		}
		hookCost += int64(len(sink.deliveries[path])) * store.DeliveryRowCost
	}
	sink.mu.Unlock()
	t.Logf("storage used by B today: %d bytes; its messages cost %d, two pairing codes %d, its webhook events as received %d", used, msgCost, 2*store.PairingCost, hookCost)
	if want := msgCost + 2*store.PairingCost + hookCost; used != want {
		t.Errorf("storage used by B: %d, want %d (its messages, pairing codes and webhook events): %+d", used, want, used-want)
	}
	var startErrs []string
	for _, r := range runs {
		for line := range strings.SplitSeq(r.stderr.String(), "\n") {
			if strings.Contains(line, "level=ERROR") || strings.Contains(line, "panic") {
				startErrs = append(startErrs, line)
			}
		}
	}
	for _, l := range startErrs[:min(20, len(startErrs))] {
		t.Logf("server log: %s", l)
	}
	t.Logf("answered %d sends (A and B), %d jobs to A's phones, %d inbound, %d webhook deliveries (%d distinct ids), %d error lines in the logs",
		len(all), jobsA, len(inbound), hits, distinct, len(startErrs))
}

func (k *killPhone) has(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.jobs[id] > 0
}

// callKeyed is call with an Idempotency-Key.
func callKeyed(t *testing.T, url, key, idem string, body any) (int, map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idem)
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

type historyItem struct {
	ID        any    `json:"id"`
	Direction string `json:"direction"`
	Message   string `json:"message"`
}

// history is every message of a conversation, page by page.
func history(t *testing.T, base, key, fp, phone string) []struct {
	ID        string
	Direction string
	Message   string
} {
	t.Helper()
	var out []struct {
		ID        string
		Direction string
		Message   string
	}
	for page := 1; page <= 1000; page++ {
		code, raw := get(t, fmt.Sprintf("%s/chat/messages?device_fingerprint=%s&phone=%s&limit=100&page=%d", base, fp, url.QueryEscape(phone), page), key)
		var h struct {
			Messages []historyItem `json:"messages"`
			Pages    int           `json:"pages"`
		}
		if err := json.Unmarshal(raw, &h); code != 200 || err != nil {
			t.Fatalf("history of %s %s: %d %s", fp, phone, code, raw)
		}
		for _, m := range h.Messages {
			out = append(out, struct {
				ID        string
				Direction string
				Message   string
			}{fmt.Sprint(m.ID), m.Direction, m.Message})
		}
		if page >= h.Pages {
			break
		}
	}
	return out
}

// createCompanyAs runs admin create-company for the company name, owned
// by email, on st and returns the API key it prints.
func createCompanyAs(t *testing.T, bin string, st testStore, name, email string) string {
	t.Helper()
	args := append([]string{"admin", "create-company", "--company", name, "--email", email, "--password", "Change-me-123"}, st.args()...)
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("create-company %s: %v", name, err)
	}
	var created struct {
		APIKey string `json:"apiKey"`
	}
	if err := json.Unmarshal(out, &created); err != nil || created.APIKey == "" {
		t.Fatalf("create-company printed %q (%v), want {\"apiKey\": ...}", out, err)
	}
	return created.APIKey
}

// gammaFree is the company id of the user of email.
func gammaFree(b store.Backend, t *testing.T, email string) uint64 {
	t.Helper()
	u, err := b.UserByEmail(email)
	if err != nil {
		t.Fatal(err)
	}
	return u.CompanyID
}

// readFilled reads what the company of email holds, for checkRemoved.
func readFilled(t *testing.T, st testStore, email, fp string, ids []string) conformance.Filled {
	t.Helper()
	b := openTestBackend(t, st)
	defer b.Close()
	var f conformance.Filled
	id := gammaFree(b, t, email)
	var err error
	if f.Company, err = b.Company(id); err != nil {
		t.Fatal(err)
	}
	if f.Users, err = b.CompanyUsers(id); err != nil {
		t.Fatal(err)
	}
	d, err := b.CompanyDevice(id, fp)
	if err != nil {
		t.Fatal(err)
	}
	f.Devices = []store.Device{d}
	for _, uuid := range ids {
		m, err := b.MessageByUUID(id, uuid)
		if err != nil {
			t.Fatalf("message %s of company %d: %v", uuid, id, err)
		}
		f.Messages = append(f.Messages, m)
	}
	return f
}

// checkRemoved is conformance.CheckRemoved for what readFilled read.
func checkRemoved(t *testing.T, b store.Backend, f conformance.Filled) {
	t.Helper()
	rs, ok := b.(conformance.RemovalStore)
	if !ok {
		t.Fatalf("%T is no conformance.RemovalStore", b)
	}
	conformance.CheckRemoved(t, rs, f)
}

// smtpCert writes a certificate for the SMTP listener: its files and the
// client's TLS configuration.
func smtpCert(t *testing.T) (certFile, keyFile string, clientTLS *tls.Config) {
	t.Helper()
	serverTLS, clientTLS, err := mailtest.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(t.TempDir(), "cert.pem"), filepath.Join(t.TempDir(), "key.pem")
	cert := serverTLS.Certificates[0]
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, clientTLS
}
