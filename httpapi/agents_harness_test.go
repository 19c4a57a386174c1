package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
)

// agent is a reference-client agent announcing WhatsApp numbers and
// iMessage handles. It records each job with the test clock's time when it
// arrived, and counts config frames: a config pushed after a pump is a
// barrier, since the link writes frames in order.
type agent struct {
	*client.Phone
	e       *env
	fp      string
	mu      sync.Mutex
	jobs    []proto.Send
	at      []time.Time
	configs int
	stop    context.CancelFunc
	done    chan error
}

func (e *env) runAgent(reg client.Registration, fp string, wa, im []string, autoReport bool) *agent {
	e.t.Helper()
	a := &agent{e: e, fp: fp, done: make(chan error, 1)}
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
			a.jobs = append(a.jobs, s)
			a.at = append(a.at, e.clock.Now())
			a.mu.Unlock()
			if autoReport {
				go func() {
					a.Report(s.ID, proto.StatusSent, "")
					a.Report(s.ID, proto.StatusDelivered, "")
				}()
			}
		},
		OnConfig: func(proto.Config) {
			a.mu.Lock()
			a.configs++
			a.mu.Unlock()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	go func() { a.done <- a.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-a.done })
	e.eventually("the agent connects", a.Connected)
	return a
}

// halt ends the agent's link and waits until it is down.
func (a *agent) halt() {
	a.stop()
	<-a.done
	a.done <- nil // for the cleanup
}

func (a *agent) Jobs() ([]proto.Send, []time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]proto.Send(nil), a.jobs...), append([]time.Time(nil), a.at...)
}

// settle pumps the agent's link now, on this goroutine (Repump: a Kick
// returns before its pump), and waits until every frame the pump wrote
// has reached the agent: the config written after it is the barrier.
func (a *agent) settle() {
	a.e.t.Helper()
	a.mu.Lock()
	want := a.configs + 1
	a.mu.Unlock()
	id := linkedID(a.e.hub, a.fp)
	a.e.hub.Repump(a.fp, id)
	a.e.hub.Configure(a.fp, id, proto.Config{SelectedSIM: "SIM1"})
	a.e.eventually("the barrier config arrives", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.configs >= want
	})
}

// numbers lists the company's numbers (whatsapp) or handles (imessage).
func (e *env) numbers(token, ch string) []map[string]any {
	e.t.Helper()
	path, key := "/whatsapp/numbers", "numbers"
	if ch == "imessage" {
		path, key = "/imessage/handles", "handles"
	}
	r := e.do(call{method: "GET", path: path, token: token})
	e.want(r, http.StatusOK, "")
	list, ok := r.Body[key].([]any)
	if !ok {
		e.t.Fatalf("no %s list: %s", key, r.Raw)
	}
	out := make([]map[string]any, 0, len(list))
	for _, v := range list {
		out = append(out, v.(map[string]any))
	}
	return out
}

// numberID is the public id of the company's number or handle addr.
func (e *env) numberID(token, ch, addr string) string {
	e.t.Helper()
	idKey, addrKey := "number_id", "phone"
	if ch == "imessage" {
		idKey, addrKey = "handle_id", "handle"
	}
	for _, n := range e.numbers(token, ch) {
		if n[addrKey] == addr {
			return n[idKey].(string)
		}
	}
	e.t.Fatalf("no %s %s listed", ch, addr)
	return ""
}

// waSend sends a WhatsApp text and returns the answer.
func (e *env) waSend(token, numberID, to, content string) resp {
	e.t.Helper()
	return e.do(call{method: "POST", path: "/whatsapp/send", token: token, body: map[string]any{"number_id": numberID, "to": to, "content": content}})
}

func retryAfter(r resp) int {
	var n int
	fmt.Sscan(r.Header.Get("Retry-After"), &n)
	return n
}
