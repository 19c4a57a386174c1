package httpapi_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// detailAgent is a reference-client agent that reports by hand and keeps
// the error frames it gets.
type detailAgent struct {
	*client.Phone
	mu     sync.Mutex
	jobs   map[string]bool
	errors []proto.Error
}

func (e *env) runDetailAgent(reg client.Registration, wa, im []string) *detailAgent {
	e.t.Helper()
	a := &detailAgent{jobs: map[string]bool{}}
	hello := proto.Hello{AppVersion: "test", SIMs: []proto.SIM{{Slot: "SIM1"}}}
	for _, n := range wa {
		hello.WhatsApp = append(hello.WhatsApp, proto.WhatsAppNumber{Phone: n})
	}
	for _, h := range im {
		hello.IMessage = append(hello.IMessage, proto.IMessageHandle{Handle: h})
	}
	a.Phone = client.New(client.Config{
		WSURL: reg.WSURL, Token: reg.DeviceToken, Hello: hello,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnJob: func(s proto.Send) {
			a.mu.Lock()
			a.jobs[s.ID] = true
			a.mu.Unlock()
		},
		OnError: func(f proto.Error) {
			a.mu.Lock()
			a.errors = append(a.errors, f)
			a.mu.Unlock()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	e.eventually("the agent connects", a.Connected)
	return a
}

func (a *detailAgent) has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.jobs[id]
}

func (a *detailAgent) errorsSeen() []proto.Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]proto.Error(nil), a.errors...)
}

// TestAgentReadDetail: a WhatsApp read receipt is a delivered report with
// detail read. The message keeps it (single message and number history),
// the detail only moves forward, and however often delivered and read are
// reported there is one message.delivered event. Another company gets 404;
// an unknown detail is refused; an SMS keeps no detail.
func TestAgentReadDetail(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Bolt", "owner@bolt.test")
	ag := e.runDetailAgent(e.pairPhone(a.apiKey, "agent-a"), []string{waNumber}, []string{imHandle})
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	im := e.numberID(a.apiKey, "imessage", imHandle)
	e.whPut(a.apiKey, map[string]any{"url": rc.URL + "/status", "events": []string{"message.sent", "message.delivered"}})

	id := e.waSend(a.apiKey, wa, "+15557654321", "hello").str("id")
	e.eventually("the send reaches the agent", func() bool { return ag.has(id) })
	get := func() resp {
		r := e.do(call{method: "GET", path: "/whatsapp/messages/" + id, token: a.apiKey})
		e.want(r, http.StatusOK, "")
		return r
	}
	settled := func(what string) { e.eventually(what+" acknowledged", func() bool { return ag.Pending() == 0 }) }

	ag.Report(id, proto.StatusSent, "")
	ag.Report(id, proto.StatusDelivered, "")
	settled("sent and delivered")
	if r := get(); r.str("status") != "delivered" || r.Body["detail"] != nil {
		t.Fatalf("after delivered: %s, want status delivered and detail null", r.Raw)
	}
	delivered := get().str("updated_at")

	e.clock.Advance(time.Minute)
	ag.ReportDetail(id, proto.DetailRead)
	ag.Report(id, proto.StatusDelivered, "") // a repeat: changes nothing
	ag.ReportDetail(id, proto.DetailRead)    // a repeat too
	settled("read")
	r := get()
	if r.str("status") != "delivered" || r.str("detail") != "read" {
		t.Fatalf("after read: %s, want status delivered and detail read", r.Raw)
	}
	if r.str("updated_at") == delivered {
		t.Fatalf("updated_at stayed %s after the read", delivered)
	}
	hist := e.do(call{method: "GET", path: "/whatsapp/messages?number_id=" + wa, token: a.apiKey})
	e.want(hist, http.StatusOK, "")
	if msgs := hist.Body["messages"].([]any); len(msgs) != 1 || msgs[0].(map[string]any)["detail"] != "read" {
		t.Fatalf("number history: %s, want the message with detail read", hist.Raw)
	}

	// played implies read; a late read does not move it back.
	ag.ReportDetail(id, proto.DetailPlayed)
	ag.ReportDetail(id, proto.DetailRead)
	settled("played")
	if r := get(); r.str("detail") != "played" {
		t.Fatalf("after played and a late read: %s, want detail played", r.Raw)
	}

	// A detail is no status: the counters saw one send, delivered once.
	if got := analyticsCounts(e.analytics(a.apiKey, "").Body["totals"]); got[0] != 1 || got[1] != 1 {
		t.Fatalf("totals [sent delivered failed received expired]: got %v, want one sent and one delivered", got)
	}

	// One message.sent and one message.delivered event, however often
	// delivered and read were reported. The log lists attempts, which the
	// webhook worker records after it made them: wait for the first two.
	count := map[string]int{}
	e.eventually("the first attempts are in the deliveries log", func() bool {
		clear(count)
		for _, d := range e.whLog(a.apiKey, "") {
			if d.Attempt <= 1 {
				count[d.EventType]++
			}
		}
		return count["message.sent"]+count["message.delivered"] >= 2
	})
	if count["message.sent"] != 1 || count["message.delivered"] != 1 {
		t.Fatalf("status events %v, want one message.sent and one message.delivered", count)
	}
	e.eventually("the events arrive", func() bool { return len(statusEvents(t, rc, "/status")) >= 2 })
	if evs := statusEvents(t, rc, "/status"); len(evs) != 2 {
		t.Fatalf("receiver got %d status events, want 2", len(evs))
	}

	// Another company sees none of it.
	e.want(e.do(call{method: "GET", path: "/whatsapp/messages/" + id, token: b.apiKey}), http.StatusNotFound, "not_found")

	// A detail the protocol does not define is refused, naming the field.
	other := e.waSend(a.apiKey, wa, "+15557654322", "second").str("id")
	e.eventually("the second send reaches the agent", func() bool { return ag.has(other) })
	ag.Report(other, proto.StatusDelivered, "")
	settled("the second delivered")
	ag.ReportDetail(other, "seen")
	e.eventually("the bad detail is refused", func() bool { return len(ag.errorsSeen()) == 1 })
	if f := ag.errorsSeen()[0]; f.Code != "validation_failed" || f.Field != "detail" || f.ID != other {
		t.Fatalf("refusal %+v, want validation_failed on field detail for %s", f, other)
	}
	if r := e.do(call{method: "GET", path: "/whatsapp/messages/" + other, token: a.apiKey}); r.Body["detail"] != nil {
		t.Fatalf("a refused detail was kept: %s", r.Raw)
	}

	// iMessage shows the field too, null without a detail.
	imID := e.do(call{method: "POST", path: "/imessage/send", token: a.apiKey, body: map[string]any{"handle_id": im, "to": "bob@example.com", "content": "hi"}}).str("id")
	e.eventually("the iMessage send reaches the agent", func() bool { return ag.has(imID) })
	ag.Report(imID, proto.StatusDelivered, "")
	settled("the iMessage delivered")
	if r := e.do(call{method: "GET", path: "/imessage/messages/" + imID, token: a.apiKey}); r.str("status") != "delivered" {
		t.Fatalf("iMessage: %s, want delivered", r.Raw)
	} else if v, ok := r.Body["detail"]; !ok || v != nil {
		t.Fatalf("iMessage: %s, want detail null", r.Raw)
	}

	// SMS: a valid detail is acknowledged and ignored.
	q := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("agent-a", "+15557654323", "sms", "SIM1")})
	e.want(q, http.StatusOK, "")
	qid := q.str("queueId")
	e.eventually("the SMS reaches the agent", func() bool { return ag.has(qid) })
	ag.Report(qid, proto.StatusDelivered, "")
	ag.ReportDetail(qid, proto.DetailRead)
	settled("the SMS reports")
	if got := len(ag.errorsSeen()); got != 1 {
		t.Fatalf("the SMS detail was refused: %+v", ag.errorsSeen())
	}
	m, err := e.store.MessageByUUID(uint64(a.id), qid)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != "delivered" || m.Detail != "" {
		t.Fatalf("SMS: status %q detail %q, want delivered and no detail", m.Status, m.Detail)
	}
}
