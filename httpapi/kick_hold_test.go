package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/holdtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// holdDevice has a failover's hold of the linked device begin, held open
// by the test until it calls the returned let (or ends).
func holdDevice(t *testing.T, e *env, fingerprint string) (let func()) {
	t.Helper()
	return holdtest.Hold(t, e.hub, fingerprint, linkedID(e.hub, fingerprint))
}

// heldAnswer is a request's answer, made on a goroutine of its own
// (requestAsync).
type heldAnswer struct {
	status int
	body   []byte
	err    error
}

// requestAsync makes a JSON request with the bearer token on a goroutine
// of its own, and hands its answer over the channel it returns.
func requestAsync(e *env, method, path, token string, body any) <-chan heldAnswer {
	answered := make(chan heldAnswer, 1)
	go func() {
		raw, _ := json.Marshal(body)
		req, err := http.NewRequest(method, e.url+path, bytes.NewReader(raw))
		if err != nil {
			answered <- heldAnswer{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := testhttp.Client.Do(req)
		if err != nil {
			answered <- heldAnswer{err: err}
			return
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		answered <- heldAnswer{res.StatusCode, body, err}
	}()
	return answered
}

// answeredWhileHeld waits for the answer of a request made while a device
// was held, failing the test (and letting the hold go) when it does not
// come in time.
func answeredWhileHeld(t *testing.T, answered <-chan heldAnswer, let func(), what string) heldAnswer {
	t.Helper()
	select {
	case got := <-answered:
		if got.err != nil || got.status != http.StatusOK {
			t.Fatalf("%s: status %d, %s, err %v; want 200", what, got.status, got.body, got.err)
		}
		return got
	case <-time.After(poll.Timeout):
		let()
		t.Fatalf("%s: the answer waited for the failover's hold of its device", what)
	}
	return heldAnswer{}
}

// A send to a phone whose queued jobs a failover is moving (the hub holds
// the device: its link's pump waits until the move commits) is answered
// at once: the job is durable, and the link's own goroutine pumps it once
// the hold ends. Before, the send's request pumped the link itself and its
// answer waited for the move. The hold here is held open by the test until
// the answer came.
func TestSendIsAnsweredWhileItsDeviceIsHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "owner@acme.test")
	vp := e.runPhone(e.pairPhone(a.apiKey, "held-phone"), "SIM1", false)
	let := holdDevice(t, e, "held-phone")

	got := answeredWhileHeld(t, requestAsync(e, "POST", "/chat/send", a.apiKey, sendBody("held-phone", "+15551234567", "while held", "SIM1")), let, "the send")
	var body struct{ QueueID string }
	if err := json.Unmarshal(got.body, &body); err != nil || body.QueueID == "" {
		t.Fatalf("the send's answer %s: %v", got.body, err)
	}
	if jobs := vp.Jobs(); len(jobs) != 0 {
		t.Fatalf("the phone got %d jobs while its device was held, want none", len(jobs))
	}

	let()
	e.eventually("the job reaches the phone once the hold ends", func() bool {
		jobs := vp.Jobs()
		return len(jobs) == 1 && jobs[0].ID == body.QueueID
	})
}

// A change of a held device's pace (PATCH sms_per_minute) is answered at
// once too: the link's own goroutine takes the new pace and pumps once
// the hold ends. Before, the request set the pace and pumped the link
// itself, each under the pump's lock that the hold keeps, and its answer
// waited for the move.
func TestPaceChangeIsAnsweredWhileItsDeviceIsHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "owner@acme.test")
	vp := e.runPhone(e.pairPhone(a.apiKey, "held-phone"), "SIM1", false)
	let := holdDevice(t, e, "held-phone")

	got := answeredWhileHeld(t, requestAsync(e, "PATCH", "/device/held-phone", a.apiKey, map[string]any{"sms_per_minute": 600}), let, "the pace change")
	var body struct {
		SMSPerMinute int `json:"sms_per_minute"`
	}
	if err := json.Unmarshal(got.body, &body); err != nil || body.SMSPerMinute != 600 {
		t.Fatalf("the pace change's answer %s (%v), want sms_per_minute 600", got.body, err)
	}

	let()
	// The link goes on at the new pace: a send reaches the phone.
	sent := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("held-phone", "+15551234567", "after the hold", "SIM1")})
	e.want(sent, http.StatusOK, "")
	queueID := sent.str("queueId")
	e.eventually("the job reaches the phone after the hold", func() bool {
		jobs := vp.Jobs()
		return len(jobs) == 1 && jobs[0].ID == queueID
	})
}
