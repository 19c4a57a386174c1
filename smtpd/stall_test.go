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

// dataSession is a raw SMTP client past STARTTLS, AUTH, MAIL, RCPT and
// DATA: write sends bytes of the mail's text, reply reads the next reply,
// and closed tells whether the server then closed the connection.
type dataSession struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func (e *env) dataSession(key string) *dataSession {
	e.t.Helper()
	raw, err := net.DialTimeout("tcp", e.smtpAddr, 5*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { raw.Close() })
	d := &dataSession{t: e.t, c: raw, r: bufio.NewReader(raw)}
	say := func(cmd, want string) {
		d.t.Helper()
		d.write(cmd + "\r\n")
		if got := d.reply(); !strings.HasPrefix(got, want) {
			d.t.Fatalf("%s: got %q, want %s", cmd, got, want)
		}
	}
	d.reply() // greeting
	say("EHLO client.test", "250")
	say("STARTTLS", "220")
	tc := tls.Client(raw, e.clientTLS)
	d.c, d.r = tc, bufio.NewReader(tc)
	say("EHLO client.test", "250")
	say("AUTH PLAIN "+base64.StdEncoding.EncodeToString([]byte("\x00"+key+"\x00x")), "235")
	say("MAIL FROM:<monitor@example.com>", "250")
	say("RCPT TO:<+15551234567@"+domain+">", "250")
	say("DATA", "354")
	return d
}

func (d *dataSession) write(s string) {
	d.t.Helper()
	if _, err := io.WriteString(d.c, s); err != nil {
		d.t.Fatal(err)
	}
}

func (d *dataSession) reply() string {
	d.t.Helper()
	_ = d.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var last string
	for {
		line, err := d.r.ReadString('\n')
		if err != nil {
			d.t.Fatalf("read after %q: %v", last, err)
		}
		if last = line; len(line) < 4 || line[3] != '-' {
			return last
		}
	}
}

func (d *dataSession) closed() bool {
	_ = d.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := d.r.ReadString('\n')
	return err != nil
}

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
	d := e.dataSession(key)
	d.write("Subject: disk full\r\n\r\nThe disk is")
	got := d.reply() // the client stalls; the deadline passes
	if !strings.HasPrefix(got, "421 4.4.2 ") || strings.Contains(got, "127.0.0.1") {
		t.Fatalf("a mail that stopped arriving: got %q, want 421 4.4.2 without the socket's addresses", got)
	}
	if !d.closed() {
		t.Fatal("the connection stays open after the 421")
	}
	if n := len(vp.Jobs()); n != 0 { // the text never came whole, so no send was made
		t.Fatalf("the phone got %d jobs, want none", n)
	}
}

// TestMailWithALineTooLong: a line of the text over 2,000 bytes is refused
// for good with one reply that says so, and the connection closed (the
// rest of the text cannot be read as the mail's).
func TestMailWithALineTooLong(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	d := e.dataSession(key)
	d.write("Subject: x\r\n\r\n" + strings.Repeat("a", 2500) + "\r\n.\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "500 5.4.0 ") || !strings.Contains(got, "longer than 2000 bytes") {
		t.Fatalf("a line too long: got %q, want 500 5.4.0 naming the limit", got)
	}
	if !d.closed() {
		t.Fatal("the connection stays open, or a second reply came")
	}
	if n := len(vp.Jobs()); n != 0 {
		t.Fatalf("the phone got %d jobs, want none", n)
	}
}
