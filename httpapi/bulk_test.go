package httpapi_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/webhook"
)

func bulkBody(fp string, n int) map[string]any {
	msgs := make([]map[string]any, n)
	for i := range msgs {
		msgs[i] = map[string]any{"phone": fmt.Sprintf("+1555000%04d", i), "message": fmt.Sprint("hello ", i)}
	}
	return map[string]any{"device_fingerprint": fp, "messages": msgs}
}

// A bulk send validates every message first (naming messages[i].field),
// stores them all, answers the queue ids in input order, and the phone gets
// them in that order; the same Idempotency-Key queues nothing new; the
// rate limit counts the request once.
func TestBulkSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	e.pairPhone(b.apiKey, "b-phone")

	bad := bulkBody("a-phone", 5)
	bad["messages"].([]map[string]any)[3]["phone"] = "5550001"
	cases := []struct {
		name   string
		body   map[string]any
		status int
		code   string
		field  string
	}{
		{"a bad phone", bad, 400, "validation_failed", "messages[3].phone"},
		{"no messages", bulkBody("a-phone", 0), 400, "validation_failed", "messages"},
		{"1001 messages", bulkBody("a-phone", 1001), 400, "validation_failed", "messages"},
		{"no device", bulkBody("", 1), 400, "validation_failed", "device_fingerprint"},
		{"another company's device", bulkBody("b-phone", 1), 404, "not_found", "device_fingerprint"},
	}
	long := bulkBody("a-phone", 3)
	long["messages"].([]map[string]any)[2]["message"] = strings.Repeat("a", 1601)
	cases = append(cases, struct {
		name   string
		body   map[string]any
		status int
		code   string
		field  string
	}{"a long message", long, 400, "validation_failed", "messages[2].message"})
	for _, c := range cases {
		r := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: c.body})
		if r.Status != c.status || r.str("error") != c.code || r.str("field") != c.field {
			t.Errorf("%s: got %d %s, want %d %s field %s", c.name, r.Status, r.Raw, c.status, c.code, c.field)
		}
	}
	if r := e.do(call{method: "GET", path: "/chat/conversations?device_fingerprint=a-phone", token: a.apiKey}); strings.Contains(string(r.Raw), "+1555") {
		t.Fatalf("a refused bulk stored messages: %s", r.Raw)
	}

	key := map[string]string{"Idempotency-Key": "campaign-1"}
	r := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 1000), header: key})
	e.want(r, http.StatusOK, "")
	var ans struct {
		Queued   int      `json:"queued"`
		QueueIDs []string `json:"queueIds"`
	}
	mustJSON(t, r.Raw, &ans)
	if ans.Queued != 1000 || len(ans.QueueIDs) != 1000 || len(r.Body) != 2 {
		t.Fatalf("got queued %d with %d ids", ans.Queued, len(ans.QueueIDs))
	}
	remaining := r.Header.Get("RateLimit-Remaining")
	again := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 1000), header: key})
	e.want(again, http.StatusOK, "")
	if string(again.Raw) != string(r.Raw) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the replay differs: %s", again.Raw)
	}
	// The key is spent on that request: another one under it is refused.
	e.want(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 2), header: key}),
		http.StatusUnprocessableEntity, "idempotency_key_reused")
	before, err1 := strconv.Atoi(remaining)
	after, err2 := strconv.Atoi(again.Header.Get("RateLimit-Remaining"))
	if err1 != nil || err2 != nil || before-after != 1 {
		t.Errorf("rate limit remaining: %q then %q, want one request counted for a bulk of 1000", remaining, again.Header.Get("RateLimit-Remaining"))
	}
	q := e.queueStatus(a.apiKey, ans.QueueIDs[999])
	if q.str("status") == "" {
		t.Fatalf("last: %s", q.Raw)
	}
	e.eventually("the phone takes the jobs in order", func() bool {
		jobs := phone.Jobs()
		return len(jobs) >= 16 // the ack window; none acked
	})
	for i, j := range phone.Jobs() {
		if j.ID != ans.QueueIDs[i] || j.To != fmt.Sprintf("+1555000%04d", i) {
			t.Fatalf("job %d: got %s to %s, want %s", i, j.ID, j.To, ans.QueueIDs[i])
		}
	}
	r = e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15550000007", token: a.apiKey})
	if r.Body["total"] != float64(1) {
		t.Fatalf("history of one recipient: %s", r.Raw)
	}
	e.want(e.do(call{method: "GET", path: "/chat/queue/" + ans.QueueIDs[0], token: b.apiKey}), http.StatusNotFound, "not_found")

	// The device's rules, and the body limit, hold as on /chat/send.
	big := bulkBody("a-phone", 1000)
	for _, m := range big["messages"].([]map[string]any) {
		m["message"] = strings.Repeat("a", 1100)
	}
	e.want(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: big}), http.StatusRequestEntityTooLarge, "payload_too_large")
	e.want(e.do(call{method: "PATCH", path: "/device/a-phone", token: a.apiKey, body: map[string]any{"selected_sim": "SIM1"}}), http.StatusOK, "")
	slot2 := bulkBody("a-phone", 2)
	slot2["sim_slot"] = "SIM2"
	r = e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: slot2})
	e.want(r, http.StatusForbidden, "sim_mismatch")
	slot2["sim_slot"] = "SIM3"
	if r := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: slot2}); r.Status != 400 || r.str("field") != "sim_slot" {
		t.Errorf("bad slot: got %d %s", r.Status, r.Raw)
	}
	e.want(e.do(call{method: "PATCH", path: "/device/a-phone", token: a.apiKey, body: map[string]any{"status": "disabled"}}), http.StatusOK, "")
	e.want(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 2)}), http.StatusForbidden, "device_disabled")
}

// The plan's message limit counts every message of a bulk send: one that
// does not fit whole stores nothing; one that fits is stored whole.
func TestBulkSendPlanLimitAllOrNone(t *testing.T) {
	t.Parallel()
	e := newBillingEnv(t, storetest.Options{}, webhook.Config{}, billing.Config{Plans: tinyPlans(t), DefaultPlan: "tiny"}, roomy)
	a := e.newCompany("Acme", "ana@acme.example")
	e.pairPhone(a.apiKey, "a-phone")
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "one", "")}), http.StatusOK, "")
	r := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 3)})
	e.want(r, http.StatusTooManyRequests, "plan_limit_reached")
	sub := e.do(call{method: "GET", path: "/billing/subscription", token: a.apiKey})
	if u := sub.Body["usage"].(map[string]any); u["messages_this_period"] != float64(1) {
		t.Fatalf("after a refused bulk: %s", sub.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 2)}), http.StatusOK, "")
	sub = e.do(call{method: "GET", path: "/billing/subscription", token: a.apiKey})
	if u := sub.Body["usage"].(map[string]any); u["messages_this_period"] != float64(3) {
		t.Fatalf("after a bulk of 2: %s", sub.Raw)
	}
	e.want(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 1)}), http.StatusTooManyRequests, "plan_limit_reached")
}

// A bulk send that does not fit in what is left of the plan's messages says
// how many are left, so that the client can send that many now: it was told
// the period's messages "are used" while most of them were not.
func TestBulkSendPlanLimitSaysWhatIsLeft(t *testing.T) {
	t.Parallel()
	e := newBillingEnv(t, storetest.Options{}, webhook.Config{}, billing.Config{Plans: tinyPlans(t), DefaultPlan: "tiny"}, roomy)
	a := e.newCompany("Acme", "ana@acme.example")
	e.pairPhone(a.apiKey, "a-phone")
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551234567", "one", "")}), http.StatusOK, "")
	r := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 3)})
	e.want(r, http.StatusTooManyRequests, "plan_limit_reached")
	msg := r.str("message")
	if strings.Contains(msg, "they are used") || !strings.Contains(msg, "1 of them is used") ||
		!strings.Contains(msg, "3 messages of this request do not fit in the 2 left") {
		t.Fatalf("a bulk of 3 with 2 of 3 messages left: %q", msg)
	}
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("no Retry-After: %s", r.Raw)
	}
	// Once none is left, the refusal is the one a single send gets.
	e.want(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 2)}), http.StatusOK, "")
	r = e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 2)})
	e.want(r, http.StatusTooManyRequests, "plan_limit_reached")
	if msg := r.str("message"); !strings.Contains(msg, "3 messages per billing period and they are used") {
		t.Fatalf("a bulk with none left: %q", msg)
	}
}

// The daily storage budget counts a bulk send's sum: over it, nothing is stored.
func TestBulkSendStorageBudgetAllOrNone(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t, storetest.Options{CompanyDailyStorage: 200 << 10}, webhook.Config{}, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	used, err := e.store.StorageUsed(uint64(a.id), e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 1000)})
	e.want(r, http.StatusTooManyRequests, "storage_budget_exceeded")
	if after, _ := e.store.StorageUsed(uint64(a.id), e.clock.Now()); after != used {
		t.Fatalf("a refused bulk counted %d bytes", after-used)
	}
	e.want(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: bulkBody("a-phone", 100)}), http.StatusOK, "")
}
