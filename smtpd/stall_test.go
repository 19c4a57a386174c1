package smtpd_test

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/smtpd"
)

// TestMailThatStopsArrivingIsTemporary: a client that stops in the middle
// of a mail's text is answered 421 4.4.2 once the read deadline passes (a
// temporary failure: its retry sends the mail), with nothing of the
// server's socket in the reply, and the connection is closed; nothing is
// queued. go-smtp answered 554 5.0.0 "transaction failed: read tcp
// ...: i/o timeout", which made a mail server bounce the mail for good.
func TestMailThatStopsArrivingIsTemporary(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: smtpd.Config{Timeout: time.Second}})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	raw, err := net.DialTimeout("tcp", e.smtpAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var c net.Conn = raw
	r := bufio.NewReader(c)
	reply := func() string {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var last string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("read after %q: %v", last, err)
			}
			if last = line; len(line) < 4 || line[3] != '-' {
				return last
			}
		}
	}
	say := func(cmd, want string) {
		t.Helper()
		if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
			t.Fatal(err)
		}
		if got := reply(); !strings.HasPrefix(got, want) {
			t.Fatalf("%s: got %q, want %s", cmd, got, want)
		}
	}
	reply() // greeting
	say("EHLO client.test", "250")
	say("STARTTLS", "220")
	tc := tls.Client(raw, e.clientTLS)
	c, r = tc, bufio.NewReader(tc)
	say("EHLO client.test", "250")
	say("AUTH PLAIN "+base64.StdEncoding.EncodeToString([]byte("\x00"+key+"\x00x")), "235")
	say("MAIL FROM:<monitor@example.com>", "250")
	say("RCPT TO:<+15551234567@"+domain+">", "250")
	say("DATA", "354")
	if _, err := io.WriteString(c, "Subject: disk full\r\n\r\nThe disk is"); err != nil {
		t.Fatal(err)
	}
	got := reply() // the client stalls; the deadline passes
	if !strings.HasPrefix(got, "421 4.4.2 ") || strings.Contains(got, "127.0.0.1") {
		t.Fatalf("a mail that stopped arriving: got %q, want 421 4.4.2 without the socket's addresses", got)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("the connection stays open after the 421: got %q", line)
	}
	if n := len(vp.Jobs()); n != 0 { // the text never came whole, so no send was made
		t.Fatalf("the phone got %d jobs, want none", n)
	}
}
