package httpapi_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/webhook/webhooktest"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook"
)

// whConfig trusts the receiver and allows its loopback address.
func whConfig(rc *webhooktest.Receiver, schedule ...time.Duration) webhook.Config {
	return webhook.Config{AllowPrivate: true, RootCAs: rc.Pool(), Schedule: schedule}
}

// whSign is the expected signature, computed here without the server's signer.
func whSign(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp + "." + string(body)))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// whPut replaces the company's webhooks and returns the answer's entries.
func (e *env) whPut(token string, entries ...map[string]any) []map[string]any {
	e.t.Helper()
	if entries == nil {
		entries = []map[string]any{} // [] clears the set; null would be refused
	}
	r := e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: token, body: map[string]any{"webhooks": entries}})
	e.want(r, http.StatusOK, "")
	var body struct {
		Message  string           `json:"message"`
		Webhooks []map[string]any `json:"webhooks"`
	}
	mustJSON(e.t, r.Raw, &body)
	if body.Message == "" || len(body.Webhooks) != len(entries) {
		e.t.Fatalf("PUT answered %s", r.Raw)
	}
	return body.Webhooks
}

func (e *env) whSecret(token string) string {
	e.t.Helper()
	r := e.do(call{method: "GET", path: "/webhooks/inbound-sms", token: token})
	e.want(r, http.StatusOK, "")
	return r.str("signingSecret")
}

// whAttempt is an item of GET /webhooks/deliveries.
type whAttempt struct {
	ID            uint64  `json:"id"`
	WebhookID     uint64  `json:"webhook_id"`
	EventID       string  `json:"event_id"`
	DeliveryID    string  `json:"delivery_id"`
	EventType     string  `json:"event_type"`
	Attempt       int     `json:"attempt"`
	State         string  `json:"state"`
	StatusCode    *int    `json:"status_code"`
	Error         *string `json:"error"`
	DurationMS    *int64  `json:"duration_ms"`
	CreatedAt     string  `json:"created_at"`
	NextAttemptAt *string `json:"next_attempt_at"`
}

func (e *env) whLog(token, query string) []whAttempt {
	e.t.Helper()
	r := e.do(call{method: "GET", path: "/webhooks/deliveries" + query, token: token})
	e.want(r, http.StatusOK, "")
	var body struct {
		Deliveries []whAttempt `json:"deliveries"`
	}
	mustJSON(e.t, r.Raw, &body)
	if body.Deliveries == nil {
		e.t.Fatalf("deliveries is not an array: %s", r.Raw)
	}
	return body.Deliveries
}

func TestWebhookConfigurationAndSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")

	// The secret is created on first use and then stays.
	r := e.do(call{method: "GET", path: "/webhooks/inbound-sms", token: a.access})
	e.want(r, http.StatusOK, "")
	secret := r.str("signingSecret")
	if !strings.HasPrefix(secret, "whsec_") || len(secret) != len("whsec_")+43 {
		t.Fatalf("got secret %q, want whsec_ and 43 base64url characters", secret)
	}
	if hooks, ok := r.Body["webhooks"].([]any); !ok || len(hooks) != 0 {
		t.Fatalf("got webhooks %v, want []", r.Body["webhooks"])
	}
	if again := e.whSecret(a.apiKey); again != secret {
		t.Fatalf("the secret changed between two reads: %q then %q", secret, again)
	}

	// PUT answers the stored entries: ids, defaults, arrays.
	first := e.whPut(a.access,
		map[string]any{"url": "https://hooks.example.com/a", "devices": []string{"p1"}, "sims": []int{1}, "channels": []string{"sms"}},
		map[string]any{"url": "https://hooks.example.com/b", "active": false, "wa_numbers": []string{"+1 555 010 0009"}, "im_handles": []string{"Ana@Example.com"}},
	)
	want0 := map[string]any{"url": "https://hooks.example.com/a", "active": true, "devices": []any{"p1"}, "sims": []any{float64(1)},
		"channels": []any{"sms"}, "wa_numbers": []any{}, "im_handles": []any{}}
	for k, v := range want0 {
		if fmt.Sprint(first[0][k]) != fmt.Sprint(v) {
			t.Errorf("entry 0 %s: got %v, want %v", k, first[0][k], v)
		}
	}
	if first[1]["active"] != false || fmt.Sprint(first[1]["wa_numbers"]) != "[+15550100009]" || fmt.Sprint(first[1]["im_handles"]) != "[ana@example.com]" {
		t.Errorf("entry 1: got %v", first[1])
	}
	idA, idB := first[0]["id"].(float64), first[1]["id"].(float64)
	if idA <= 0 || idB <= 0 || idA == idB {
		t.Fatalf("got ids %v and %v, want two distinct integers", idA, idB)
	}

	// A second PUT replaces the set: the id sent back is kept, the other entry goes, a new one gets a new id.
	second := e.whPut(a.apiKey,
		map[string]any{"id": idB, "url": "https://hooks.example.com/b2"},
		map[string]any{"url": "https://hooks.example.com/c"},
	)
	if second[0]["id"] != idB || second[0]["url"] != "https://hooks.example.com/b2" || second[0]["active"] != true {
		t.Fatalf("kept entry: got %v, want id %v with the new url, active again", second[0], idB)
	}
	if id := second[1]["id"].(float64); id == idA || id == idB {
		t.Fatalf("new entry got id %v, an id already used", id)
	}
	r = e.do(call{method: "GET", path: "/webhooks/inbound-sms", token: a.access})
	if hooks := r.Body["webhooks"].([]any); len(hooks) != 2 || hooks[0].(map[string]any)["id"] != idB {
		t.Fatalf("GET after PUT: got %s", r.Raw)
	}
	if r.str("signingSecret") != secret {
		t.Fatal("a PUT changed the signing secret")
	}

	// Members read; only admins (and the API key) write and rotate the secret.
	_, member := e.phonesInviteMember(a, "max@acme.test")
	e.want(e.do(call{method: "GET", path: "/webhooks/inbound-sms", token: member}), http.StatusOK, "")
	e.want(e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: member, body: map[string]any{"webhooks": []any{}}}), http.StatusForbidden, "forbidden")
	e.want(e.do(call{method: "POST", path: "/webhooks/signing-secret/rotate", token: member}), http.StatusForbidden, "forbidden")
	if e.whSecret(a.apiKey) != secret {
		t.Fatal("a member's refused rotation changed the signing secret")
	}
	rot := e.do(call{method: "POST", path: "/webhooks/signing-secret/rotate", token: a.access})
	e.want(rot, http.StatusOK, "")
	rotated := rot.str("signingSecret")
	if !strings.HasPrefix(rotated, "whsec_") || rotated == secret || e.whSecret(a.apiKey) != rotated {
		t.Fatalf("rotate: got %q (was %q), want a new secret that GET then shows", rotated, secret)
	}
	e.want(e.do(call{method: "GET", path: "/webhooks/deliveries", token: member}), http.StatusOK, "")
	e.want(e.do(call{method: "GET", path: "/webhooks/inbound-sms"}), http.StatusUnauthorized, "unauthorized")

	// Another company sees none of it and cannot claim A's ids.
	r = e.do(call{method: "GET", path: "/webhooks/inbound-sms", token: b.apiKey})
	if hooks := r.Body["webhooks"].([]any); len(hooks) != 0 || r.str("signingSecret") == rotated || r.str("signingSecret") == "" {
		t.Fatalf("company B: got %s", r.Raw)
	}
	bad := e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: b.apiKey, body: map[string]any{"webhooks": []any{map[string]any{"id": idB, "url": "https://b.example.com"}}}})
	e.want(bad, http.StatusBadRequest, "validation_failed")
	if bad.str("field") != "webhooks[0].id" {
		t.Fatalf("got field %q, want webhooks[0].id", bad.str("field"))
	}
	// An empty set clears A's entries.
	e.whPut(a.apiKey)
	if hooks := e.do(call{method: "GET", path: "/webhooks/inbound-sms", token: a.apiKey}).Body["webhooks"].([]any); len(hooks) != 0 {
		t.Fatalf("after PUT []: got %v", hooks)
	}
}

func TestWebhookValidationNamesTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	ok := map[string]any{"url": "https://hooks.example.com/sms"}
	many := make([]any, 21)
	for i := range many {
		many[i] = ok
	}
	tests := []struct {
		name  string
		body  any
		field string
	}{
		{"no webhooks", map[string]any{}, "webhooks"},
		{"webhooks null", `{"webhooks": null}`, "webhooks"},
		{"webhooks not an array", map[string]any{"webhooks": "https://x.example.com"}, "webhooks"},
		{"21 entries", map[string]any{"webhooks": many}, "webhooks"},
		{"entry not an object", map[string]any{"webhooks": []any{ok, 5}}, "webhooks[1]"},
		{"no url", map[string]any{"webhooks": []any{ok, map[string]any{"active": true}}}, "webhooks[1].url"},
		{"relative url", map[string]any{"webhooks": []any{map[string]any{"url": "/sms"}}}, "webhooks[0].url"},
		{"http url", map[string]any{"webhooks": []any{map[string]any{"url": "http://hooks.example.com/sms"}}}, "webhooks[0].url"},
		{"url not a string", map[string]any{"webhooks": []any{map[string]any{"url": 7}}}, "webhooks[0].url"},
		{"active not a bool", map[string]any{"webhooks": []any{map[string]any{"url": ok["url"], "active": "yes"}}}, "webhooks[0].active"},
		{"sims as names", map[string]any{"webhooks": []any{map[string]any{"url": ok["url"], "sims": []string{"SIM1"}}}}, "webhooks[0].sims[0]"},
		{"sim 2", map[string]any{"webhooks": []any{ok, ok, map[string]any{"url": ok["url"], "sims": []int{0, 2}}}}, "webhooks[2].sims[1]"},
		{"channel fax", map[string]any{"webhooks": []any{map[string]any{"url": ok["url"], "channels": []string{"sms", "fax"}}}}, "webhooks[0].channels[1]"},
		{"devices not strings", map[string]any{"webhooks": []any{map[string]any{"url": ok["url"], "devices": []int{1}}}}, "webhooks[0].devices[0]"},
		{"wa number without +", map[string]any{"webhooks": []any{map[string]any{"url": ok["url"], "wa_numbers": []string{"5550100009"}}}}, "webhooks[0].wa_numbers[0]"},
		{"unknown event type", map[string]any{"webhooks": []any{map[string]any{"url": ok["url"], "events": []string{"message.bounced"}}}}, "webhooks[0].events[0]"},
		{"second event unknown", map[string]any{"webhooks": []any{ok, map[string]any{"url": ok["url"], "events": []string{"sms.received", "sms.sent"}}}}, "webhooks[1].events[1]"},
		{"empty device", map[string]any{"webhooks": []any{map[string]any{"url": ok["url"], "devices": []string{"a-phone", " "}}}}, "webhooks[0].devices[1]"},
		{"device no fingerprint can be", map[string]any{"webhooks": []any{map[string]any{"url": ok["url"], "devices": []string{"a-phone", "pixel 7"}}}}, "webhooks[0].devices[1]"},
		{"im handle with a space", map[string]any{"webhooks": []any{map[string]any{"url": ok["url"], "im_handles": []string{"not a handle"}}}}, "webhooks[0].im_handles[0]"},
		{"user and password in the url", map[string]any{"webhooks": []any{map[string]any{"url": "https://user:secret@hooks.example.com/sms"}}}, "webhooks[0].url"},
		{"user in the url", map[string]any{"webhooks": []any{ok, map[string]any{"url": "https://user@hooks.example.com/sms"}}}, "webhooks[1].url"},
		{"id not a number", map[string]any{"webhooks": []any{map[string]any{"id": "one", "url": ok["url"]}}}, "webhooks[0].id"},
		{"unknown id", map[string]any{"webhooks": []any{map[string]any{"id": 999, "url": ok["url"]}}}, "webhooks[0].id"},
	}
	for _, tt := range tests {
		r := e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: a.apiKey, body: tt.body})
		if r.Status != http.StatusBadRequest || r.str("error") != "validation_failed" || r.str("field") != tt.field || r.str("message") == "" {
			t.Errorf("%s: got %d %s, want 400 validation_failed on %s", tt.name, r.Status, r.Raw, tt.field)
		}
	}
	e.want(e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: a.apiKey, body: "{"}), http.StatusBadRequest, "invalid_json")
	for q, field := range map[string]string{"?webhook_id=abc": "webhook_id", "?webhook_id=0": "webhook_id", "?webhook_id=-1": "webhook_id", "?limit=0": "limit", "?limit=101": "limit"} {
		r := e.do(call{method: "GET", path: "/webhooks/deliveries" + q, token: a.apiKey})
		if r.Status != http.StatusBadRequest || r.str("field") != field {
			t.Errorf("deliveries%s: got %d %s, want 400 on %s", q, r.Status, r.Raw, field)
		}
	}
	// Nothing was stored by the refused requests.
	if hooks := e.do(call{method: "GET", path: "/webhooks/inbound-sms", token: a.apiKey}).Body["webhooks"].([]any); len(hooks) != 0 {
		t.Fatalf("refused PUTs stored %v", hooks)
	}
	if exp := e.do(call{method: "GET", path: "/company/export", token: a.apiKey}); exp.Status != http.StatusOK || strings.Contains(string(exp.Raw), "secret@") {
		t.Fatalf("the export: got %d, want 200 without the refused URL's password: %.300s", exp.Status, exp.Raw)
	}
}

// Without --webhook-allow-private, http and literal non-public hosts are
// refused when the entry is saved.
func TestWebhookPrivateAddressesRefusedAtPut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	for _, u := range []string{
		"http://hooks.example.com/sms",
		"https://localhost/hook",
		"https://localhost:8443/hook",
		"https://127.0.0.1/hook",
		"https://127.0.0.2:9000/hook",
		"https://[::1]/hook",
		"https://[::ffff:127.0.0.1]/hook",
		"https://[::ffff:7f00:1]/hook",
		"https://169.254.169.254/latest/meta-data/",
		"https://[::ffff:169.254.169.254]/latest/meta-data/",
		"https://10.0.0.8/hook",
		"https://172.16.5.4/hook",
		"https://192.168.0.10/hook",
		"https://100.64.0.1/hook",
		"https://0.0.0.0/hook",
		"https://[::]/hook",
		"https://224.0.0.251/hook",
		"https://255.255.255.255/hook",
		"https://[fe80::1]/hook",
		"https://[fd00::5]/hook",
		"https://[ff02::1]/hook",
		"https://2130706433/hook",
	} {
		r := e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: a.apiKey, body: map[string]any{"webhooks": []any{map[string]any{"url": u}}}})
		if r.Status != http.StatusBadRequest || r.str("field") != "webhooks[0].url" {
			t.Errorf("%s: got %d %s, want 400 on webhooks[0].url", u, r.Status, r.Raw)
		}
	}
	e.whPut(a.apiKey, map[string]any{"url": "https://hooks.example.com/sms"}, map[string]any{"url": "https://8.8.8.8/hook"})
}

// An SMS from the reference phone reaches the receiver signed, with the
// inbound message as the phone's ack names it.
func TestWebhookDeliversAnInboundSMS(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	hooks := e.whPut(a.apiKey, map[string]any{"url": rc.URL + "/simrelay"})
	secret := e.whSecret(a.apiKey)

	ack := waitAck(t, phone.Receive(proto.Inbound{ClientID: "in-1", From: "+1 555 765 4321", Message: "Your code is 123456", SIMSlot: "SIM2", ReceivedAt: "2026-11-22T09:59:58.000Z"}))
	e.eventually("the delivery arrives", func() bool { return len(rc.Requests()) == 1 })
	got := rc.Requests()[0]
	h := got.Header
	if got.Path != "/simrelay" {
		t.Fatalf("got path %s", got.Path)
	}
	if want := whSign(secret, h.Get("X-Service-Timestamp"), got.Body); h.Get("X-Service-Signature") != want {
		t.Fatalf("got signature %q, want %q", h.Get("X-Service-Signature"), want)
	}
	var stamp int64
	if _, err := fmt.Sscan(h.Get("X-Service-Timestamp"), &stamp); err != nil || time.Since(time.Unix(stamp, 0)).Abs() > 5*time.Minute {
		t.Fatalf("got timestamp %q, want the unix seconds of now", h.Get("X-Service-Timestamp"))
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "X-Service-Event": "sms.received", "User-Agent": "simrelay-webhook/1"} {
		if h.Get(k) != v {
			t.Errorf("header %s: got %q, want %q", k, h.Get(k), v)
		}
	}
	var body struct {
		ID        string         `json:"id"`
		Type      string         `json:"type"`
		CreatedAt string         `json:"created_at"`
		Data      map[string]any `json:"data"`
	}
	mustJSON(t, got.Body, &body)
	if body.ID == "" || body.ID != h.Get("X-Service-Delivery") || body.Type != "sms.received" {
		t.Fatalf("got id %q type %q with delivery header %q", body.ID, body.Type, h.Get("X-Service-Delivery"))
	}
	if _, err := time.Parse(contractTime, body.CreatedAt); err != nil {
		t.Errorf("created_at %q: %v", body.CreatedAt, err)
	}
	want := map[string]any{"id": float64(ack.ID), "uuid": ack.UUID, "phone": "+15557654321", "message": "Your code is 123456",
		"sim_slot": "SIM2", "device_fingerprint": "a-phone", "received_at": "2026-11-22T09:59:58.000Z", "channel": "sms"}
	for k, v := range want {
		if body.Data[k] != v {
			t.Errorf("data.%s: got %v, want %v", k, body.Data[k], v)
		}
	}
	if ack.UUID == "" {
		t.Error("the ack carries no uuid")
	}

	e.eventually("the attempt is logged", func() bool { return len(e.whLog(a.apiKey, "")) == 1 })
	l := e.whLog(a.apiKey, "")[0]
	if l.State != "delivered" || l.StatusCode == nil || *l.StatusCode != 204 || l.Error != nil || l.NextAttemptAt != nil || l.Attempt != 1 ||
		l.DeliveryID != body.ID || l.EventType != "sms.received" || float64(l.WebhookID) != hooks[0]["id"] || l.EventID == "" || l.ID == 0 || l.DurationMS == nil {
		t.Fatalf("got log item %+v", l)
	}
	if _, err := time.Parse(contractTime, l.CreatedAt); err != nil {
		t.Errorf("log created_at %q: %v", l.CreatedAt, err)
	}
}

// A receiver that fails gets the delivery again later: the same delivery id,
// a fresh timestamp and signature. The log has one item per attempt.
func TestWebhookRetriesWithAFreshSignature(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, func(n int, _ *http.Request, _ http.ResponseWriter) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	// A first retry after (at least) a second makes the timestamps differ.
	e := newWebhookEnv(t, whConfig(rc, time.Second), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	hooks := e.whPut(a.apiKey, map[string]any{"url": rc.URL + "/one"}, map[string]any{"url": rc.URL + "/two", "channels": []string{"whatsapp"}})
	secret := e.whSecret(a.apiKey)
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "in-1", From: "+15557654321", Message: "hi", SIMSlot: "SIM1"}))

	e.eventually("the retry arrives", func() bool { return len(rc.Requests()) == 2 })
	reqs := rc.Requests()
	one, two := reqs[0].Header, reqs[1].Header
	if one.Get("X-Service-Delivery") != two.Get("X-Service-Delivery") || string(reqs[0].Body) != string(reqs[1].Body) {
		t.Fatalf("the retry is not the same delivery: %q vs %q", one.Get("X-Service-Delivery"), two.Get("X-Service-Delivery"))
	}
	if one.Get("X-Service-Timestamp") == two.Get("X-Service-Timestamp") || one.Get("X-Service-Signature") == two.Get("X-Service-Signature") {
		t.Fatal("the retry reused the first attempt's timestamp and signature")
	}
	for i, r := range reqs {
		if want := whSign(secret, r.Header.Get("X-Service-Timestamp"), r.Body); r.Header.Get("X-Service-Signature") != want {
			t.Errorf("attempt %d: got signature %q, want %q", i+1, r.Header.Get("X-Service-Signature"), want)
		}
	}

	e.eventually("both attempts are logged", func() bool { return len(e.whLog(a.apiKey, "")) == 2 })
	items := e.whLog(a.apiKey, "")
	newest, oldest := items[0], items[1]
	if newest.Attempt != 2 || newest.State != "delivered" || *newest.StatusCode != 200 || newest.NextAttemptAt != nil {
		t.Errorf("newest: got %+v, want attempt 2 delivered", newest)
	}
	if oldest.Attempt != 1 || oldest.State != "pending" || *oldest.StatusCode != 500 || oldest.Error == nil || oldest.NextAttemptAt == nil {
		t.Errorf("oldest: got %+v, want attempt 1 pending with 500, an error and a next attempt", oldest)
	}
	if newest.ID <= oldest.ID || newest.DeliveryID != oldest.DeliveryID || newest.EventID != oldest.EventID {
		t.Errorf("got ids %d and %d of %s/%s, want rising ids of one delivery", oldest.ID, newest.ID, oldest.DeliveryID, newest.DeliveryID)
	}
	id := uint64(hooks[0]["id"].(float64))
	if got := e.whLog(a.apiKey, fmt.Sprintf("?webhook_id=%d", id)); len(got) != 2 {
		t.Errorf("filtered by the first entry: got %d items, want 2", len(got))
	}
	if got := e.whLog(a.apiKey, fmt.Sprintf("?webhook_id=%d", uint64(hooks[1]["id"].(float64)))); len(got) != 0 {
		t.Errorf("filtered by the whatsapp-only entry: got %d items, want 0", len(got))
	}
	if got := e.whLog(a.apiKey, "?limit=1"); len(got) != 1 || got[0].Attempt != 2 {
		t.Errorf("limit 1: got %+v, want the newest", got)
	}
	if got := e.whLog(b.apiKey, ""); len(got) != 0 {
		t.Errorf("another company: got %d items, want 0", len(got))
	}
	if got := e.whLog(b.apiKey, fmt.Sprintf("?webhook_id=%d", id)); len(got) != 0 {
		t.Errorf("another company filtering by A's entry: got %d items, want 0", len(got))
	}
}

// The server (its webhook service) restarts between two attempts: the new
// one, on the same store, delivers the retry.
func TestWebhookRetryAfterRestart(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	up := false
	rc := webhooktest.NewReceiver(t, true, func(int, *http.Request, http.ResponseWriter) int {
		mu.Lock()
		defer mu.Unlock()
		if up {
			return http.StatusOK
		}
		return http.StatusBadGateway
	})
	e := newWebhookEnv(t, whConfig(rc, time.Hour), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	e.whPut(a.apiKey, map[string]any{"url": rc.URL})
	secret := e.whSecret(a.apiKey)
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "in-1", From: "+15557654321", Message: "hi"}))
	e.eventually("the first attempt is logged", func() bool { return len(e.whLog(a.apiKey, "")) == 1 })
	e.stopWebhooks()
	mu.Lock()
	up = true
	mu.Unlock()

	// The new service's clock is past the hour the retry waits for.
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	restarted, err := webhook.New(whConfig(rc, time.Hour), e.store, slog.New(slog.NewTextHandler(io.Discard, nil)), later)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = restarted.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	e.eventually("the retry is delivered", func() bool { return len(e.whLog(a.apiKey, "")) == 2 })
	items := e.whLog(a.apiKey, "")
	if items[0].State != "delivered" || items[0].Attempt != 2 || items[0].DeliveryID != items[1].DeliveryID || items[1].State != "pending" {
		t.Fatalf("got %+v, want attempt 2 of the same delivery delivered", items)
	}
	reqs := rc.Requests()
	if len(reqs) != 2 || reqs[1].Header.Get("X-Service-Delivery") != items[0].DeliveryID {
		t.Fatalf("got %d requests, want 2 of delivery %s", len(reqs), items[0].DeliveryID)
	}
	if want := whSign(secret, reqs[1].Header.Get("X-Service-Timestamp"), reqs[1].Body); reqs[1].Header.Get("X-Service-Signature") != want {
		t.Fatal("the retry after the restart is not signed with the secret")
	}
}

// Scope: each message goes to exactly the active entries whose devices,
// sims and channels take it.
func TestWebhookScopeMatrix(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	pa := e.runPhone(e.pairPhone(a.apiKey, "phone-a"), "BOTH", false)
	pb := e.runPhone(e.pairPhone(a.apiKey, "phone-b"), "BOTH", false)
	e.whPut(a.apiKey,
		map[string]any{"url": rc.URL + "/all"},
		map[string]any{"url": rc.URL + "/dev-a", "devices": []string{"phone-a"}},
		map[string]any{"url": rc.URL + "/sim1", "sims": []int{0}},
		map[string]any{"url": rc.URL + "/sim2", "sims": []int{1}},
		map[string]any{"url": rc.URL + "/sms", "channels": []string{"sms"}},
		map[string]any{"url": rc.URL + "/whatsapp", "channels": []string{"whatsapp", "imessage"}},
		map[string]any{"url": rc.URL + "/off", "active": false},
		map[string]any{"url": rc.URL + "/b-sim2", "devices": []string{"phone-b"}, "sims": []int{1}},
		map[string]any{"url": rc.URL + "/b-sim1", "devices": []string{"phone-b"}, "sims": []int{0}},
		map[string]any{"url": rc.URL + "/wa-number", "wa_numbers": []string{"+15550109001"}},
	)
	m1 := waitAck(t, pa.Receive(proto.Inbound{ClientID: "a-1", From: "+15557654321", Message: "to A on SIM1", SIMSlot: "SIM1"}))
	m2 := waitAck(t, pb.Receive(proto.Inbound{ClientID: "b-1", From: "+15557654321", Message: "to B on SIM2", SIMSlot: "SIM2"}))
	want := map[string][]uint64{
		"/all":       {m1.ID, m2.ID},
		"/dev-a":     {m1.ID},
		"/sim1":      {m1.ID},
		"/sim2":      {m2.ID},
		"/sms":       {m1.ID, m2.ID},
		"/b-sim2":    {m2.ID},
		"/wa-number": {m1.ID, m2.ID}, // wa_numbers scope WhatsApp only
	}
	total := 0
	for _, ids := range want {
		total += len(ids)
	}
	e.eventually("every matching delivery is logged", func() bool { return len(e.whLog(a.apiKey, "")) == total })
	// The outbox rows were written with the messages, so an empty outbox now
	// means nothing else is on its way.
	if ids, _, err := e.store.DueWebhookDeliveries(time.Now().Add(365*24*time.Hour), 100, nil); err != nil || len(ids) != 0 {
		t.Fatalf("got %d deliveries still in the outbox (%v), want 0", len(ids), err)
	}
	got := map[string][]uint64{}
	for _, r := range rc.Requests() {
		var body struct {
			Data struct {
				ID uint64 `json:"id"`
			} `json:"data"`
		}
		mustJSON(t, r.Body, &body)
		got[r.Path] = append(got[r.Path], body.Data.ID)
	}
	for path := range got {
		sort.Slice(got[path], func(i, j int) bool { return got[path][i] < got[path][j] })
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got deliveries by path %v, want %v", got, want)
	}
}

// TestWebhookDevicesOfAnotherCompany: a devices scope naming another
// company's device is answered exactly as one naming a phone no company has
// paired (200, the entry as sent: no existence oracle), and neither entry
// gets anything of the other company's messages nor of its own company's
// other phones.
func TestWebhookDevicesOfAnotherCompany(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Beta", "owner@beta.test")
	pa := e.runPhone(e.pairPhone(a.apiKey, "phone-a"), "BOTH", false)
	pb := e.runPhone(e.pairPhone(b.apiKey, "phone-b"), "BOTH", false)
	e.whPut(b.apiKey, map[string]any{"url": rc.URL + "/b-own", "devices": []string{"phone-b"}})
	answers := map[string]string{}
	for _, fp := range []string{"phone-b", "never-paired"} {
		r := e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: a.apiKey, body: map[string]any{"webhooks": []any{
			map[string]any{"url": rc.URL + "/a-names-" + fp, "devices": []string{fp}}}}})
		if r.Status != http.StatusOK {
			t.Fatalf("naming %s: got %d %s, want 200", fp, r.Status, r.Raw)
		}
		hooks := r.Body["webhooks"].([]any)
		entry := hooks[0].(map[string]any)
		answers[fp] = fmt.Sprintf("%v %v %v", r.Body["message"], entry["active"], entry["devices"])
	}
	if answers["phone-b"] != "Webhooks saved. true [phone-b]" || answers["never-paired"] != "Webhooks saved. true [never-paired]" {
		t.Fatalf("the answers differ beyond the name: %q", answers)
	}
	e.whPut(a.apiKey,
		map[string]any{"url": rc.URL + "/a-names-phone-b", "devices": []string{"phone-b"}},
		map[string]any{"url": rc.URL + "/a-names-never-paired", "devices": []string{"never-paired"}},
		map[string]any{"url": rc.URL + "/a-all"},
	)
	mb := waitAck(t, pb.Receive(proto.Inbound{ClientID: "b-1", From: "+15557654321", Message: "to Beta", SIMSlot: "SIM1"}))
	ma := waitAck(t, pa.Receive(proto.Inbound{ClientID: "a-1", From: "+15557654321", Message: "to Acme", SIMSlot: "SIM1"}))
	e.eventually("each company's own delivery is logged", func() bool {
		return len(e.whLog(a.apiKey, "")) == 1 && len(e.whLog(b.apiKey, "")) == 1
	})
	if ids, _, err := e.store.DueWebhookDeliveries(time.Now().Add(365*24*time.Hour), 100, nil); err != nil || len(ids) != 0 {
		t.Fatalf("got %d deliveries still in the outbox (%v), want 0", len(ids), err)
	}
	got := map[string]uint64{}
	for _, r := range rc.Requests() {
		var body struct {
			Data struct {
				ID uint64 `json:"id"`
			} `json:"data"`
		}
		mustJSON(t, r.Body, &body)
		got[r.Path] = body.Data.ID
	}
	if want := map[string]uint64{"/a-all": ma.ID, "/b-own": mb.ID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got deliveries by path %v, want %v", got, want)
	}
}

// A 410 disables the entry; a 3xx is a failure and is not followed.
func TestWebhookGoneDisablesAndRedirectFails(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, func(_ int, r *http.Request, w http.ResponseWriter) int {
		switch r.URL.Path {
		case "/gone":
			return http.StatusGone
		case "/moved":
			w.Header().Set("Location", "/target")
			return http.StatusMovedPermanently
		}
		return http.StatusOK
	})
	e := newWebhookEnv(t, whConfig(rc, time.Hour), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	hooks := e.whPut(a.apiKey, map[string]any{"url": rc.URL + "/gone"}, map[string]any{"url": rc.URL + "/moved"})
	gone, moved := hooks[0]["id"].(float64), hooks[1]["id"].(float64)
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "in-1", From: "+15557654321", Message: "hi"}))
	e.eventually("both attempts are logged", func() bool { return len(e.whLog(a.apiKey, "")) == 2 })
	for _, l := range e.whLog(a.apiKey, "") {
		switch float64(l.WebhookID) {
		case gone:
			if l.State != "failed" || *l.StatusCode != 410 || l.NextAttemptAt != nil {
				t.Errorf("410: got %+v, want failed at once", l)
			}
		case moved:
			if l.State != "pending" || *l.StatusCode != 301 || l.Error == nil || !strings.Contains(*l.Error, "redirect") {
				t.Errorf("301: got %+v, want a failed attempt to be retried", l)
			}
		}
	}
	for _, r := range rc.Requests() {
		if r.Path == "/target" {
			t.Fatal("the redirect was followed")
		}
	}
	r := e.do(call{method: "GET", path: "/webhooks/inbound-sms", token: a.apiKey})
	for _, h := range r.Body["webhooks"].([]any) {
		entry := h.(map[string]any)
		if wantActive := entry["id"] != gone; entry["active"] != wantActive {
			t.Errorf("entry %v: got active %v, want %v", entry["url"], entry["active"], wantActive)
		}
	}
	// The disabled entry gets nothing more.
	before := len(rc.Requests())
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "in-2", From: "+15557654321", Message: "again"}))
	e.eventually("the second message's delivery is logged", func() bool { return len(e.whLog(a.apiKey, "")) == 3 })
	if reqs := rc.Requests(); len(reqs) != before+1 || reqs[len(reqs)-1].Path != "/moved" {
		t.Fatalf("after the 410: got %d more requests, want one to /moved", len(reqs)-before)
	}
}

// A name that resolves to loopback at connect time (here "localhost", saved
// directly in the store as a DNS answer that changed after PUT would be) is
// refused by the dialer: the receiver on loopback gets nothing.
func TestWebhookLoopbackRefusedAtConnect(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, webhook.Config{RootCAs: rc.Pool(), Schedule: []time.Duration{time.Hour}}, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	e.whSecret(a.apiKey)
	if _, err := e.store.UpdateWebhookSet(uint64(a.id), time.Now(), func(set *store.WebhookSet) error {
		set.Entries = []store.WebhookEntry{
			{URL: "https://localhost:" + port + "/hook", Active: true},
			{URL: "https://[::ffff:127.0.0.1]:" + port + "/hook", Active: true},
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "in-1", From: "+15557654321", Message: "hi"}))
	e.eventually("both attempts are logged", func() bool { return len(e.whLog(a.apiKey, "")) == 2 })
	for _, l := range e.whLog(a.apiKey, "") {
		if l.State != "pending" || l.StatusCode != nil || l.Error == nil || !strings.Contains(*l.Error, "refused to connect") {
			t.Errorf("got %+v, want a refused connection to be retried", l)
		}
	}
	if n := len(rc.Requests()); n != 0 {
		t.Fatalf("the loopback receiver got %d requests, want 0", n)
	}
}

// A host that is a non-public address once IDNA-mapped (as net/http maps
// it before it dials) is refused at PUT like its ASCII spelling.
func TestWebhookIDNAPrivateAddressesRefusedAtPut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	for _, u := range []string{
		"https://127\u30020\u30020\u30021/hook",
		"https://127.0.0.\uff11:8443/hook",
		"https://192\uff0e168\uff0e0\uff0e10/hook",
		"https://localhost\uff61/hook",
	} {
		r := e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: a.apiKey, body: map[string]any{"webhooks": []any{map[string]any{"url": u}}}})
		if r.Status != http.StatusBadRequest || r.str("field") != "webhooks[0].url" {
			t.Errorf("%s: got %d %s, want 400 on webhooks[0].url", u, r.Status, r.Raw)
		}
	}
}
