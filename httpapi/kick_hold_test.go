package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
)

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
	id := linkedID(e.hub, "held-phone")

	holding, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- e.hub.HoldDevice("held-phone", id, func(uint64, bool) error {
			close(holding)
			<-release
			return nil
		})
	}()
	released := false
	let := func() {
		if !released {
			released = true
			close(release)
		}
	}
	t.Cleanup(let)
	select {
	case <-holding:
	case <-time.After(poll.Timeout):
		t.Fatal("the hold did not begin")
	}

	type answer struct {
		status int
		body   []byte
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		raw, _ := json.Marshal(sendBody("held-phone", "+15551234567", "while held", "SIM1"))
		req, err := http.NewRequest("POST", e.url+"/chat/send", bytes.NewReader(raw))
		if err != nil {
			answered <- answer{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+a.apiKey)
		res, err := testhttp.Client.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		answered <- answer{res.StatusCode, body, err}
	}()
	var queueID string
	select {
	case got := <-answered:
		if got.err != nil || got.status != http.StatusOK {
			t.Fatalf("the send: status %d, %s, err %v; want 200", got.status, got.body, got.err)
		}
		var body struct{ QueueID string }
		if err := json.Unmarshal(got.body, &body); err != nil || body.QueueID == "" {
			t.Fatalf("the send's answer %s: %v", got.body, err)
		}
		queueID = body.QueueID
	case <-time.After(poll.Timeout):
		let()
		t.Fatal("the send's answer waited for the failover's hold of its device")
	}
	if jobs := vp.Jobs(); len(jobs) != 0 {
		t.Fatalf("the phone got %d jobs while its device was held, want none", len(jobs))
	}

	let()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	e.eventually("the job reaches the phone once the hold ends", func() bool {
		jobs := vp.Jobs()
		return len(jobs) == 1 && jobs[0].ID == queueID
	})
}
