package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/freeport"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// call sends a JSON request with the API key and decodes the answer.
func call(t *testing.T, method, url, key string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// hookSink records status deliveries: by delivery id, the event's type and message.
type hookSink struct {
	mu         sync.Mutex
	deliveries map[string]string // X-Service-Delivery -> type:message id
}

func (h *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	h.mu.Lock()
	h.deliveries[r.Header.Get("X-Service-Delivery")] = fmt.Sprint(body.Type, ":", body.Data["queue_id"])
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// events counts the distinct deliveries per type:queue id.
func (h *hookSink) events() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, ev := range h.deliveries {
		out[ev]++
	}
	return out
}

// TestStatusEventsAcrossACrash kills the server with SIGKILL while a phone
// reports outcomes and webhook deliveries are under way, restarts it on the
// same data, and wants exactly one message.sent and one message.delivered
// event per message: none lost with a status that committed, none invented
// by a report repeated after the restart.
func TestStatusEventsAcrossACrash(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	const n = 200
	r := startStatusRun(t, bin, st, apiKey, "crash-phone", n)
	srv, addr, flags, sink, reg, ids := r.srv, r.addr, r.flags, r.sink, r.reg, r.ids

	// The phone reports every job sent, then delivered; its reports are
	// sent again on its next link until the server acknowledges them.
	var phone *client.Phone
	phone = client.New(client.Config{WSURL: "ws://" + addr + "/device/ws", Token: reg.DeviceToken, BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnJob: func(s proto.Send) {
			phone.Report(s.ID, proto.StatusSent, "")
			phone.Report(s.ID, proto.StatusDelivered, "")
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- phone.Run(ctx) }()
	defer func() { cancel(); <-done }()

	poll.Within(t, 60*time.Second, "some status events arrive before the kill", func() bool { return len(sink.events()) >= 20 })
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()
	before := len(sink.events())

	srv = startServer(t, bin, st, flags...)
	poll.Within(t, 90*time.Second, "every message delivered and its two events received", func() bool {
		return len(sink.events()) == 2*n
	})
	for _, id := range ids {
		if st, body := call(t, "GET", srv.url+"/chat/queue/"+id, apiKey, nil); st != 200 || body["status"] != "delivered" {
			t.Fatalf("message %s: %d %v, want delivered", id, st, body)
		}
	}
	evs := sink.events()
	for _, id := range ids {
		for _, typ := range []string{"message.sent", "message.delivered"} {
			if got := evs[typ+":"+id]; got != 1 {
				t.Errorf("%s of %s: got %d distinct deliveries, want 1", typ, id, got)
			}
		}
	}
	if len(evs) != 2*n {
		t.Errorf("got %d distinct events, want %d: %v", len(evs), 2*n, evs)
	}
	t.Logf("status events: %d received before the SIGKILL, %d in all", before, len(evs))
}

// TestScheduledSendSurvivesRestart stores a scheduled message, kills the
// server before its time, and restarts it: the scheduler resumes from the
// store's due-time index and the phone gets the message at its time; a
// message canceled before the kill is never sent.
func TestScheduledSendSurvivesRestart(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	addr := freeport.Addr(t)
	srv := startServer(t, bin, st, "--listen", addr)
	reg := pairDevice(t, srv.url, apiKey, "later-phone")
	at := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano)
	send := func(text string) string {
		t.Helper()
		st, body := call(t, "POST", srv.url+"/chat/send", apiKey, map[string]any{"device_fingerprint": "later-phone", "phone": "+15551234567", "message": text, "send_at": at})
		if st != 200 || body["message"] != "scheduled" {
			t.Fatalf("scheduled send: %d %v", st, body)
		}
		return body["queueId"].(string)
	}
	id := send("see you later")
	canceled := send("never mind")
	if st, body := call(t, "DELETE", srv.url+"/chat/queue/"+canceled, apiKey, nil); st != 200 || body["status"] != "canceled" {
		t.Fatalf("cancel: %d %v", st, body)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()

	srv = startServer(t, bin, st, "--listen", addr)
	var mu sync.Mutex
	var jobs []string
	phone := client.New(client.Config{WSURL: "ws://" + addr + "/device/ws", Token: reg.DeviceToken, BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnJob: func(s proto.Send) { mu.Lock(); jobs = append(jobs, s.ID); mu.Unlock() },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- phone.Run(ctx) }()
	defer func() { cancel(); <-done }()
	poll.Within(t, 30*time.Second, "the scheduled message reaches the phone", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(jobs) > 0
	})
	if st, body := call(t, "GET", srv.url+"/chat/queue/"+canceled, apiKey, nil); st != 200 || body["status"] != "canceled" {
		t.Fatalf("the canceled message: %d %v", st, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(jobs) != 1 || jobs[0] != id {
		t.Fatalf("got jobs %v, want only %s", jobs, id)
	}
}

// statusRun is a server with a webhook entry taking message.sent and
// message.delivered, a phone registered (not linked), and n SMS queued for
// it: how the crash tests of status events begin.
type statusRun struct {
	srv   *server
	addr  string
	flags []string // serve's flags, --listen included, to restart on the same address
	sink  *hookSink
	reg   client.Registration
	ids   []string // queue ids, in the order sent
}

func startStatusRun(t *testing.T, bin string, st testStore, apiKey, fingerprint string, n int) statusRun {
	t.Helper()
	r := statusRun{sink: &hookSink{deliveries: map[string]string{}}, addr: freeport.Addr(t)}
	hook := httptest.NewServer(r.sink)
	t.Cleanup(hook.Close)
	r.flags = []string{"--listen", r.addr, "--rate-general", "1000000/1m", "--webhook-allow-private"}
	r.srv = startServer(t, bin, st, r.flags...)
	if st, body := call(t, "PUT", r.srv.url+"/webhooks/inbound-sms", apiKey, map[string]any{"webhooks": []map[string]any{
		{"url": hook.URL + "/status", "events": []string{"message.sent", "message.delivered"}},
	}}); st != 200 {
		t.Fatalf("PUT webhooks: %d %v", st, body)
	}
	code, err := pairingCode(context.Background(), testhttp.Client, r.srv.url, apiKey)
	if err != nil {
		t.Fatal(err)
	}
	if r.reg, err = client.Register(context.Background(), testhttp.Client, r.srv.url, client.RegisterInput{PairingCode: code, DeviceFingerprint: fingerprint}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		st, body := call(t, "POST", r.srv.url+"/chat/send", apiKey, map[string]any{"device_fingerprint": fingerprint, "phone": "+15551234567", "message": fmt.Sprint("m", i)})
		if st != 200 {
			t.Fatalf("send %d: %d %v", i, st, body)
		}
		r.ids = append(r.ids, body["queueId"].(string))
	}
	return r
}
