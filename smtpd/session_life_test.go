package smtpd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/smtpd"
)

// TestSessionsEndAtMaxSession: a client that keeps its connection busy
// with a NOOP well within every read deadline is still cut at the end of
// Config.MaxSession, with 421 4.4.2 (temporary: it connects again), so it
// cannot keep one of the listener's places for ever.
func TestSessionsEndAtMaxSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: smtpd.Config{MaxSession: 2 * time.Second}})
	_, key := e.company("acme")
	d := e.rawSession(key)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatal("the session still answers NOOP 15 s into a 2 s life")
		}
		d.write("NOOP\r\n")
		got := d.reply()
		if strings.HasPrefix(got, "421 4.4.2 ") {
			break
		}
		if !strings.HasPrefix(got, "250") {
			t.Fatalf("NOOP: got %q, want 250 or, at the session's end, 421 4.4.2", got)
		}
		time.Sleep(200 * time.Millisecond) // the client's pace, well within the read deadline
	}
	if !d.closed() {
		t.Fatal("the connection stays open after the 421")
	}
}
