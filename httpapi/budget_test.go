package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/webhook"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// budgetPhone is a reference-client phone that records the server's error
// frames and inbound acks.
type budgetPhone struct {
	*client.Phone
	mu     sync.Mutex
	errors []proto.Error
	acks   int
}

func (e *env) runBudgetPhone(reg client.Registration) *budgetPhone {
	e.t.Helper()
	bp := &budgetPhone{}
	bp.Phone = client.New(client.Config{
		WSURL: reg.WSURL, Token: reg.DeviceToken,
		Hello:       proto.Hello{AppVersion: "test", SelectedSIM: "SIM1", SIMs: []proto.SIM{{Slot: "SIM1"}, {Slot: "SIM2"}}},
		BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnError: func(f proto.Error) {
			bp.mu.Lock()
			bp.errors = append(bp.errors, f)
			bp.mu.Unlock()
		},
		OnInboundAck: func(proto.InboundAck) {
			bp.mu.Lock()
			bp.acks++
			bp.mu.Unlock()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bp.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	e.eventually("the phone connects", bp.Connected)
	return bp
}

// answers is how many inbound frames got an answer so far.
func (bp *budgetPhone) answers() (acks int, errs []proto.Error) {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	return bp.acks, append([]proto.Error(nil), bp.errors...)
}

// The attack that once filled the disk: one phone sends inbound frames as
// large as the protocol allows, to a company with 20 webhook entries. Now the
// text is bounded, each event's body is stored once, and the company's daily
// budget stops the flood: what the store took is within the budget, the
// refused messages stay on the phone (not acknowledged), and sends through
// the API are refused with 429 until the budget renews.
func TestInboundFloodIsBoundedByTheStorageBudget(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	const budget = 1 << 20
	e := newStoreEnv(t, storetest.Options{CompanyDailyStorage: budget}, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	var entries []map[string]any
	for i := range 20 {
		entries = append(entries, map[string]any{"url": fmt.Sprintf("%s/hook/%d", rc.URL, i)})
	}
	e.whPut(a.apiKey, entries...)
	bp := e.runBudgetPhone(e.pairPhone(a.apiKey, "flood-phone"))
	sizeBefore := e.storeFileSize()

	// As large as the server takes: 10,000 characters of 4 bytes each.
	text := strings.Repeat("😀", sms.MaxInboundChars)
	const frames = 40
	for i := range frames {
		bp.Receive(proto.Inbound{ClientID: fmt.Sprintf("flood-%d", i), From: "+15550100001", Message: text, SIMSlot: "SIM1"})
		e.eventually("an answer to the inbound frame", func() bool {
			acks, errs := bp.answers()
			return acks+len(errs) == i+1
		})
	}
	acks, errs := bp.answers()
	if acks == 0 || len(errs) == 0 {
		t.Fatalf("got %d acked and %d refused, want some of each", acks, len(errs))
	}
	for _, f := range errs {
		if f.Code != "storage_budget_exceeded" || f.ClientID == "" || f.RetryAfter <= 0 || !strings.HasPrefix(f.Message, "inbound: ") {
			t.Fatalf("refusal %+v: want storage_budget_exceeded naming the client_id, with retry_after", f)
		}
	}
	// 10:00 UTC on the test clock: the budget renews in 14 hours.
	if errs[0].RetryAfter != 14*3600 {
		t.Fatalf("got retry_after %d, want %d (until midnight UTC)", errs[0].RetryAfter, 14*3600)
	}
	if pending := bp.Pending(); pending != len(errs) {
		t.Fatalf("the phone keeps %d un-acknowledged messages, want the %d refused ones", pending, len(errs))
	}
	used, err := e.store.StorageUsed(uint64(a.id), e.clock.Now())
	if err != nil || used > budget || used < budget/2 {
		t.Fatalf("the company added %d bytes today (%v), want at most the budget %d (and most of it)", used, err, budget)
	}
	t.Logf("%d frames of %d bytes × 20 webhook entries: %d acknowledged, %d refused; the company's budget counter shows %d bytes; the store file grew by %d bytes",
		frames, len(text), acks, len(errs), used, e.storeFileSize()-sizeBefore)

	// Sends through the API count against the same budget: what little is
	// left goes, then they are refused.
	var r resp
	for range 5 {
		r = e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: map[string]any{"device_fingerprint": "flood-phone", "phone": "+15550100002", "message": strings.Repeat("s", sms.MaxMessageChars)}})
		if r.Status != http.StatusOK {
			break
		}
	}
	e.want(r, http.StatusTooManyRequests, "storage_budget_exceeded")
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra != 14*3600 {
		t.Fatalf("got Retry-After %q, want %d", r.Header.Get("Retry-After"), 14*3600)
	}
	// Another company is not affected.
	b := e.newCompany("Other", "owner@other.test")
	e.pairPhone(b.apiKey, "other-phone")
	r = e.do(call{method: "POST", path: "/chat/send", token: b.apiKey, body: map[string]any{"device_fingerprint": "other-phone", "phone": "+15550100002", "message": "hi"}})
	e.want(r, http.StatusOK, "")
}

// An inbound text over MaxInboundChars is refused with validation_failed
// naming the field; one at the bound is stored.
func TestInboundTextBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	bp := e.runBudgetPhone(e.pairPhone(a.apiKey, "long-phone"))
	bp.Receive(proto.Inbound{ClientID: "at-bound", From: "+15550100001", Message: strings.Repeat("é", sms.MaxInboundChars), SIMSlot: "SIM1"})
	e.eventually("the message at the bound is acknowledged", func() bool { acks, _ := bp.answers(); return acks == 1 })
	bp.Receive(proto.Inbound{ClientID: "over-bound", From: "+15550100001", Message: strings.Repeat("é", sms.MaxInboundChars+1), SIMSlot: "SIM1"})
	e.eventually("the message over the bound is refused", func() bool { _, errs := bp.answers(); return len(errs) == 1 })
	_, errs := bp.answers()
	if f := errs[0]; f.Code != "validation_failed" || f.ClientID != "over-bound" || f.Field != "message" || f.RetryAfter != 0 {
		t.Fatalf("got %+v, want validation_failed naming over-bound and the field message, without retry_after", f)
	}
	if bp.Pending() != 0 {
		t.Fatalf("the phone keeps %d messages, want 0 (a refused message is dropped)", bp.Pending())
	}
}

// Pairing codes and invitations are stored too (codes for a day past their
// expiry, invitations with their mail): they count against the company's
// daily storage budget, and once it is spent they answer 429 like a send,
// while another company pairs and invites as before.
func TestPairingAndInvitesCountAgainstTheBudget(t *testing.T) {
	t.Parallel()
	e := newStoreEnv(t, storetest.Options{CompanyDailyStorage: 64 << 10}, webhook.Config{}, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Beta", "owner@beta.test")
	var refused resp
	for i := range 1000 { // 256 bytes a code: the 64 KiB budget is spent within 256
		r := e.do(call{method: "POST", path: "/device/pairing", token: a.apiKey})
		if r.Status != http.StatusCreated {
			refused = r
			break
		}
		if i == 999 {
			t.Fatal("1,000 pairing codes stored under a 64 KiB budget")
		}
	}
	e.want(refused, http.StatusTooManyRequests, "storage_budget_exceeded")
	if refused.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After on the refusal")
	}
	invite := func(token, email string) resp {
		return e.do(call{method: "POST", path: "/users", token: token, body: map[string]any{"firstName": "Ivy", "lastName": "Ng", "email": email, "role": "member"}})
	}
	e.want(invite(a.apiKey, "ivy@acme.test"), http.StatusTooManyRequests, "storage_budget_exceeded")
	e.want(e.do(call{method: "POST", path: "/device/pairing", token: b.apiKey}), http.StatusCreated, "")
	e.want(invite(b.apiKey, "ivy@beta.test"), http.StatusCreated, "")
}
