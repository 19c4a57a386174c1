package smtpd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
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

// TestShutdownEndsConnectionsBetweenMails: on shutdown a connection
// between mails, or in a mail whose text has not started, is answered 421
// and closed at once, and one in a mail's text finishes it (its 250) and is
// then answered 421 and closed, so
// that Shutdown returns before its deadline with nothing cut. go-smtp's
// Shutdown waits for each connection to end by itself: a client idle
// between mails held it for the whole shutdown timeout, which the server
// shares with telling the phones to reconnect.
func TestShutdownEndsConnectionsBetweenMails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	idle := e.rawSession(key)
	busy := e.dataSession(key)
	// A mail begun (MAIL, RCPT) whose text has not started: nothing of it
	// is queued, so it is ended as one between mails is. It held the
	// shutdown for the whole timeout when its client went quiet, and a
	// NOOP a minute kept it there.
	begun := e.rawSession(key)
	begun.say("MAIL FROM:<monitor@example.com>", "250")
	begun.say("RCPT TO:<+15551234567@"+domain+">", "250")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.smtp.Shutdown(ctx) }()
	if got := idle.reply(); !strings.HasPrefix(got, "421 4.4.2 ") {
		t.Fatalf("a connection between mails on shutdown: got %q, want 421 4.4.2", got)
	}
	if !idle.closed() {
		t.Fatal("the connection between mails stays open after the 421")
	}
	if got := begun.reply(); !strings.HasPrefix(got, "421 4.4.2 ") {
		t.Fatalf("a mail whose text has not started, on shutdown: got %q, want 421 4.4.2", got)
	}
	if !begun.closed() {
		t.Fatal("the connection of a mail whose text has not started stays open after the 421")
	}
	busy.write("Subject: x\r\n\r\nDisk full.\r\n.\r\n")
	if got := busy.reply(); !strings.HasPrefix(got, "250 ") {
		t.Fatalf("the mail in progress on shutdown: got %q, want 250", got)
	}
	if got := busy.reply(); !strings.HasPrefix(got, "421 4.4.2 ") {
		t.Fatalf("after the mail in progress: got %q, want 421 4.4.2", got)
	}
	if !busy.closed() {
		t.Fatal("the connection stays open after its mail and the 421")
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v, want every connection ended before the deadline", err)
	}
	poll.Until(t, "the phone gets the mail's SMS", func() bool { return len(vp.Jobs()) == 1 })
}
