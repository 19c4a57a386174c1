package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/web"
)

// TestLiveStreamOfAnEndedSessionCarriesNoMoreMessages: a stream whose
// session ended (the user removed, signed out elsewhere, a password reset)
// carries none of the company's messages after a second: the next message
// checks the session first and ends the stream with signedout. It carried
// them until its next heartbeat, up to 25 s later.
func TestLiveStreamOfAnEndedSessionCarriesNoMoreMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *envOptions) { o.streams = web.StreamConfig{Heartbeat: time.Hour} })
	ada := e.acmeWithPhone()
	events, status := ada.stream(t)
	if status != http.StatusOK {
		t.Fatalf("stream: %d", status)
	}
	send := func(b *browser, text string) {
		t.Helper()
		if p := b.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {"+15550100000"}, "message": {text}, "sim_slot": {"SIM1"}}); p.status != http.StatusOK {
			t.Fatalf("send: %d %s", p.status, p.body)
		}
	}
	send(ada, "while signed in")
	waitEvent(t, events, "while signed in")

	if err := e.store.RevokeUserSessions(1); err != nil { // the session ends elsewhere
		t.Fatal(err)
	}
	e.clock.Advance(time.Second) // the stream's last check is a second old
	colleague := e.browser()
	colleague.signIn("ada@acme.test", "Correct1horse")
	send(colleague, "after the session ended")
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the stream ended without signedout")
			}
			if ev[0] == "signedout" {
				return
			}
			if ev[0] == "message" && strings.Contains(ev[1], "after the session ended") {
				t.Fatalf("the ended session's stream carried %s", ev[1])
			}
		case <-deadline:
			t.Fatal("no signedout within 10 s")
		}
	}
}
