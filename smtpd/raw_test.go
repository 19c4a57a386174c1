package smtpd_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/smtpd"
	"github.com/simrelay/simrelay/store"
)

// dataSession is a raw SMTP client (past STARTTLS, AUTH, MAIL, RCPT and
// DATA when made by dataSession): write sends bytes, reply reads the next
// reply, and closed tells whether the server then closed the connection.
type dataSession struct {
	t   *testing.T
	c   net.Conn
	raw net.Conn // the TCP connection under c's TLS
	r   *bufio.Reader
}

func (e *env) dataSession(key string) *dataSession {
	e.t.Helper()
	d := e.rawSession(key)
	d.say("MAIL FROM:<monitor@example.com>", "250")
	d.say("RCPT TO:<+15551234567@"+domain+">", "250")
	d.say("DATA", "354")
	return d
}

// rawSession is a raw SMTP client past STARTTLS and AUTH.
func (e *env) rawSession(key string) *dataSession {
	e.t.Helper()
	raw, err := net.DialTimeout("tcp", e.smtpAddr, 5*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { raw.Close() })
	d := &dataSession{t: e.t, c: raw, raw: raw, r: bufio.NewReader(raw)}
	d.reply() // greeting
	d.say("EHLO client.test", "250")
	d.say("STARTTLS", "220")
	tc := tls.Client(raw, e.clientTLS)
	d.c, d.r = tc, bufio.NewReader(tc)
	d.say("EHLO client.test", "250")
	d.say("AUTH PLAIN "+base64.StdEncoding.EncodeToString([]byte("\x00"+key+"\x00x")), "235")
	return d
}

// say sends a command and checks its reply's start.
func (d *dataSession) say(cmd, want string) {
	d.t.Helper()
	d.write(cmd + "\r\n")
	if got := d.reply(); !strings.HasPrefix(got, want) {
		d.t.Fatalf("%s: got %q, want %s", cmd, got, want)
	}
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

// wantEndedUnsent wants the connection closed with no further reply, and
// no message stored for the company: read from the store, which holds a
// queued SMS before the 250, where the phone gets its job only later.
func (d *dataSession) wantEndedUnsent(e *env, companyID uint64) {
	d.t.Helper()
	if !d.closed() {
		d.t.Fatal("the connection stays open, or a second reply came")
	}
	var n int
	for after, done := uint64(0), false; !done; {
		msgs, next, end, err := e.store.CompanyMessagesAfter(companyID, after, 100)
		if err != nil {
			d.t.Fatal(err)
		}
		n, after, done = n+len(msgs), next, end
	}
	if n != 0 {
		d.t.Fatalf("%d messages stored, want none", n)
	}
}

// TestTextThatStopsArrivingIsTemporary: a client that stops in the middle
// of a mail's text, after DATA or in a BDAT chunk, is answered 421 4.4.2
// once the read deadline passes (a temporary failure: its retry sends the
// mail), with nothing of the server's socket in the reply, and the
// connection is closed; nothing is queued. go-smtp answered 554 5.0.0
// "transaction failed: read tcp ...: i/o timeout", which made a mail
// server bounce the mail for good (for a chunk, followed by the 421).
func TestTextThatStopsArrivingIsTemporary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(e *env, key string) *dataSession
		text  string
	}{
		{"DATA", (*env).dataSession, "Subject: disk full\r\n\r\nThe disk is"},
		{"BDAT", func(e *env, key string) *dataSession {
			d := e.rawSession(key)
			d.say("MAIL FROM:<monitor@example.com>", "250")
			d.say("RCPT TO:<+15551234567@"+domain+">", "250")
			return d
		}, "BDAT 100 LAST\r\nSubject: disk full\r\n\r\nThe disk is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, options{cfg: smtpd.Config{Timeout: time.Second}})
			id, key := e.company("acme")
			e.phone(id, "pixel7")
			d := tc.start(e, key)
			d.write(tc.text)
			got := d.reply() // the client stalls; the deadline passes
			if !strings.HasPrefix(got, "421 4.4.2 ") || strings.Contains(got, "127.0.0.1") {
				t.Fatalf("a text that stopped arriving: got %q, want 421 4.4.2 without the socket's addresses", got)
			}
			d.wantEndedUnsent(e, id)
		})
	}
}

// TestTextTimeCountsFromData: a mail's text has the read timeout from its
// DATA, as the replies table says, not from the reply before DATA: a
// client that took most of the timeout between its RCPT's reply and its
// DATA (composing the mail) had its text cut at that first deadline, 421,
// though the text came well within the timeout of DATA.
func TestTextTimeCountsFromData(t *testing.T) {
	t.Parallel()
	const timeout = 4 * time.Second
	e := newEnv(t, options{cfg: smtpd.Config{Timeout: timeout}})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	d := e.rawSession(key)
	d.say("MAIL FROM:<monitor@example.com>", "250")
	d.say("RCPT TO:<+15551234567@"+domain+">", "250")
	time.Sleep(timeout * 3 / 4) // the client composes the mail
	d.say("DATA", "354")
	d.write("Subject: disk full\r\n\r\nThe disk is")
	time.Sleep(timeout / 2) // the rest is slow to come, within the timeout of DATA
	d.write(" full.\r\n.\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "250 ") {
		t.Fatalf("a text within the timeout of its DATA: got %q, want 250", got)
	}
	poll.Until(t, "the phone gets the SMS", func() bool { return len(vp.Jobs()) == 1 })
}

// TestRotatedKeyEndsTheSession: rotating the API key stops a session
// logged in with the old one at its next command, as the API refuses the
// old key at once: 421 4.7.0 and the connection closed, nothing queued; a
// new session with the new key sends. The session went on sending with the
// old key for up to its 30 minutes.
func TestRotatedKeyEndsTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	d := e.rawSession(key)
	d.say("MAIL FROM:<monitor@example.com>", "250")
	newKey, _, err := e.accounts.RotateAPIKey(context.Background(), account.Principal{CompanyID: id, Role: store.RoleAdmin, ViaAPIKey: true})
	if err != nil {
		t.Fatal(err)
	}
	d.say("RCPT TO:<+15551234567@"+domain+">", "421 4.7.0 ")
	if !d.closed() {
		t.Fatal("the connection stays open after the 421")
	}
	d = e.dataSession(newKey)
	d.write("Subject: x\r\n\r\nDisk full.\r\n.\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "250 ") {
		t.Fatalf("a mail with the new key: got %q, want 250", got)
	}
	poll.Until(t, "the phone gets the SMS", func() bool { return len(vp.Jobs()) >= 1 })
	if jobs := vp.Jobs(); len(jobs) != 1 || jobs[0].Message != "Disk full." {
		t.Fatalf("the phone got %+v, want the new session's SMS alone", jobs)
	}
}

// TestMailWithALineTooLong: a line of the text over 2,000 bytes is refused
// for good with one reply that says so, and the connection closed (the
// rest of the text cannot be read as the mail's).
func TestMailWithALineTooLong(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	e.phone(id, "pixel7")
	d := e.dataSession(key)
	d.write("Subject: x\r\n\r\n" + strings.Repeat("a", 2500) + "\r\n.\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "500 5.4.0 ") || !strings.Contains(got, "longer than 2000 bytes") {
		t.Fatalf("a line too long: got %q, want 500 5.4.0 naming the limit", got)
	}
	d.wantEndedUnsent(e, id)
}

// TestChunkedMailWithALineTooLong: a mail sent in BDAT chunks with a line
// over 2,000 bytes is refused as one sent after DATA, wherever the line
// is: 500 5.4.0, the connection closed, nothing queued. go-smtp refused it
// only in the first bytes of a chunk, those it read with the command, and
// took it further on: the same mail was refused or sent as its long line
// (an attachment's) came early or late.
func TestChunkedMailWithALineTooLong(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	e.phone(id, "pixel7")
	for _, at := range []int{0, 10000} {
		text := "Subject: x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nDisk full.\r\n" +
			"--b\r\nContent-Type: text/csv\r\nContent-Disposition: attachment; filename=df.csv\r\n\r\n" +
			strings.Repeat(strings.Repeat("1", 70)+"\r\n", at/72) + strings.Repeat("2", 2500) + "\r\n--b--\r\n"
		d := e.rawSession(key)
		d.say("MAIL FROM:<monitor@example.com>", "250")
		d.say("RCPT TO:<+15551234567@"+domain+">", "250")
		d.write(fmt.Sprintf("BDAT %d LAST\r\n%s", len(text), text))
		if got := d.reply(); !strings.HasPrefix(got, "500 5.4.0 ") {
			t.Fatalf("a line too long at byte %d of a chunk: got %q, want 500 5.4.0", at, got)
		}
		d.wantEndedUnsent(e, id)
	}
	// The limit is the same byte for byte: a line DATA takes, BDAT takes.
	for _, long := range []int{1998, 1999} {
		text := "Subject: x\r\nX-Pad: " + strings.Repeat("-", long-len("X-Pad: ")) + "\r\n\r\nDisk full.\r\n"
		d := e.dataSession(key)
		d.write(text + ".\r\n")
		byData := d.reply()[:4]
		d = e.rawSession(key)
		d.say("MAIL FROM:<monitor@example.com>", "250")
		d.say("RCPT TO:<+15551234567@"+domain+">", "250")
		d.write(fmt.Sprintf("BDAT %d LAST\r\n%s", len(text), text))
		if byBDAT := d.reply()[:4]; byBDAT != byData {
			t.Fatalf("a line of %d bytes: %q after DATA, %q by BDAT", long, byData, byBDAT)
		}
	}
}

// TestUnreadableMailReplyFitsALine: the refusal of a mail that cannot be
// read quotes what it could not read, a header's value or a charset's name,
// whose folded lines may run to the mail's size: the reply stays within
// RFC 5321's 512 octets a line, as a refused send's does. It was the whole
// value, 45 KB on one line for a Content-Type folded over 50 lines.
func TestUnreadableMailReplyFitsALine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	e.phone(id, "pixel7")
	long := strings.Repeat(strings.Repeat("y", 900)+"\r\n ", 50)
	for _, header := range []string{
		"Content-Type: text/plain; charset=x" + long + "z",    // a Content-Type that does not parse
		"Content-Type: text/plain; charset=\"x" + long + "\"", // a charset the server does not know
	} {
		d := e.dataSession(key)
		d.write("Subject: x\r\n" + header + "\r\n\r\nhello\r\n.\r\n")
		got := d.reply()
		if !strings.HasPrefix(got, "550 5.6.0 The mail cannot be read: ") || len(got) > 512 {
			t.Fatalf("an unreadable mail: got %d bytes %.120q..., want a 550 5.6.0 line of at most 512", len(got), got)
		}
		d.say("MAIL FROM:<monitor@example.com>", "250") // the session goes on
	}
}

// TestRefusedRecipientsCountInTheRateLimit: every RCPT is a request in the
// API key's general window, refused ones too, as every API request counts
// whatever its answer; past the window RCPT answers 452 before it reads
// anything. Refused recipients were free: one connection named unknown
// pools without end, each a read of the company and its pools.
func TestRefusedRecipientsCountInTheRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{general: pacing.Rate{Limit: 5, Window: time.Hour}})
	id, key := e.company("acme")
	e.phone(id, "pixel7")
	d := e.rawSession(key)
	d.say("MAIL FROM:<monitor@example.com>", "250")
	for i := range 5 {
		d.say(fmt.Sprintf("RCPT TO:<+15551234567+pool-nope%d@%s>", i, domain), "550 5.1.1")
	}
	d.say("RCPT TO:<+15551234567+pool-nope5@"+domain+">", "452 4.7.0")
	d.say("RCPT TO:<+15551234567@"+domain+">", "452 4.7.0")
}

// TestMailCommandsCountInTheRateLimit: a login and a MAIL are requests in
// the API key's general window, as their key checks make them: a client
// that only logged in, or only sent MAIL and RSET, had the key checked
// without end and was never counted. A MAIL right after the login is in the
// login's count and a mail's first recipient in its MAIL's, so a mail to n
// recipients still costs n requests; past the window MAIL answers 452 4.7.0
// with the wait, as RCPT does, and a login 454 4.7.0.
func TestMailCommandsCountInTheRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{general: pacing.Rate{Limit: 4, Window: time.Hour}})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	d := e.rawSession(key)                          // the login: 1
	d.say("MAIL FROM:<monitor@example.com>", "250") // in the login's count
	d.say("RSET", "250")
	d.say("MAIL FROM:<monitor@example.com>", "250")   // 2
	d.say("RCPT TO:<+15551234567@"+domain+">", "250") // in the MAIL's count
	d.say("RCPT TO:<+15551234568@"+domain+">", "250") // 3
	d.say("DATA", "354")
	d.write("Subject: x\r\n\r\nhello\r\n.\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "250 ") {
		t.Fatalf("the mail: got %q, want 250", got)
	}
	poll.Until(t, "both recipients' SMS reach the phone", func() bool { return len(vp.Jobs()) == 2 })
	d.say("MAIL FROM:<monitor@example.com>", "250") // 4
	d.say("RSET", "250")
	d.write("MAIL FROM:<monitor@example.com>\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "452 4.7.0 ") || !strings.Contains(got, "retry after") {
		t.Fatalf("the fifth request's MAIL: got %q, want 452 4.7.0 with the wait", got)
	}
	d.say("RCPT TO:<+15551234567@"+domain+">", "502 5.5.1") // no mail was begun
	d.say("QUIT", "221")

	// Logins alone spend a window too: the fifth is refused, though its key
	// is right, and is no failed login (the address's credential window is
	// untouched).
	_, key2 := e.company("beta")
	for range 4 {
		e.rawSession(key2).say("QUIT", "221")
	}
	raw, err := net.DialTimeout("tcp", e.smtpAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	d = &dataSession{t: t, c: raw, raw: raw, r: bufio.NewReader(raw)}
	d.reply() // greeting
	d.say("EHLO client.test", "250")
	d.say("STARTTLS", "220")
	tc := tls.Client(raw, e.clientTLS)
	d.c, d.r = tc, bufio.NewReader(tc)
	d.say("EHLO client.test", "250")
	d.write("AUTH PLAIN " + base64.StdEncoding.EncodeToString([]byte("\x00"+key2+"\x00x")) + "\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "454 4.7.0 ") || !strings.Contains(got, "retry after") {
		t.Fatalf("the fifth login: got %q, want 454 4.7.0 with the wait", got)
	}
	d.say("MAIL FROM:<monitor@example.com>", "530") // not logged in
}

// TestMailClientsTextLeavesAsWritten: what common mail clients send reaches
// the phone as the text their user wrote, in the GSM alphabet when that is
// what was written: Thunderbird's format=flowed paragraph joined again, an
// Outlook HTML mail's &nbsp; a space, a BOM-led UTF-8 text without it, a
// Japanese subject decoded. Each used to leave broken, as UCS-2, or as its
// raw encoded word.
func TestMailClientsTextLeavesAsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	mails := []struct{ raw, want string }{
		{"Subject: x\r\nContent-Type: text/plain; charset=UTF-8; format=flowed\r\n\r\nThe server room is above 30 degrees since 10:12, please check the \r\ncooling unit.\r\n", "The server room is above 30 degrees since 10:12, please check the cooling unit."},
		{"Subject: x\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Your&nbsp;order&nbsp;shipped.</p><p>&nbsp;</p>\r\n", "Your order shipped."},
		{"Subject: x\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n\xef\xbb\xbfBackup done.\r\n", "Backup done."},
		{"Subject: =?ISO-2022-JP?B?GyRCJDMkcyRLJEEkTxsoQg==?=\r\n\r\n\r\n", "こんにちは"},
		// Chinese mail in HZ-GB-2312 (RFC 1843), a line continued with "~"
		// and signed: it was refused as a charset the server cannot read.
		{"From: ops@example.cn\r\nSubject: =?HZ-GB-2312?B?fns3fk5xRnc=?=\r\nMIME-Version: 1.0\r\n" +
			"Content-Type: text/plain; charset=\"HZ-GB-2312\"\r\nContent-Transfer-Encoding: 7bit\r\n\r\n" +
			"db1 ~{4EELRQBz~}~~90%, ~{;aRi8D5=~}~\r\n~{OBNgH}5c!#~}\r\n-- \r\n~{TKN,~}\r\n", "db1 磁盘已满~90%, 会议改到下午三点。"},
		// A monitoring system's HTML table: its cells ran together
		// ("Hostdb1", "StatusDOWN").
		{"Subject: x\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<table><tr><th>Host</th><td>db1</td></tr>\r\n" +
			"<tr><td>Status </td> <td><b>DOWN</b></td></tr></table>\r\n", "Host db1\nStatus DOWN"},
		// A template's preheader, hidden from readers and padded with
		// zero-width non-joiners so that previews show nothing after it: it
		// led the SMS, and the padding made it UCS-2. So do a <template>'s
		// contents, which nothing shows either.
		{"Subject: x\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<div style=\"color:#fff; DISPLAY: none !important; max-height:0\">Your order is on its way" +
			strings.Repeat("&zwnj;&nbsp;", 30) + "<span>too</span><div>and this</div></div><img src=\"x.png\" style=\"display:none\">" +
			"<template><p>Hi {{name}}</p></template><p>Order 1234 shipped.</p>\r\n", "Order 1234 shipped."},
	}
	for i, m := range mails {
		d := e.dataSession(key)
		d.write(m.raw + ".\r\n")
		if got := d.reply(); !strings.HasPrefix(got, "250 ") {
			t.Fatalf("mail %d: got %q, want 250", i, got)
		}
		poll.Until(t, "the phone gets the SMS", func() bool { return len(vp.Jobs()) == i+1 })
		if got := vp.Jobs()[i].Message; got != m.want {
			t.Errorf("mail %d: the SMS is %q, want %q", i, got, m.want)
		}
	}
}

// TestResetDuringChunkedMail: RSET between two BDAT chunks drops that mail
// (RFC 3030) and the session goes on: the next mail, pipelined behind the
// RSET, gets its own 250 and is sent once, and the reset one never is. The
// reset chunk used to read as a mail that stopped arriving: an unasked 421
// 4.4.2 after RSET's 250, the connection closed, and the pipelined mail
// queued all the same, so a client told to send it again sent it twice.
func TestResetDuringChunkedMail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	d := e.rawSession(key)
	for i := range 3 {
		reset := "Subject: x\r\n\r\nnever sent"
		next := fmt.Sprintf("Subject: x\r\n\r\nDisk %d full.\r\n", i)
		d.write("MAIL FROM:<monitor@example.com>\r\nRCPT TO:<+15551234567@" + domain + ">\r\n" +
			fmt.Sprintf("BDAT %d\r\n%s", len(reset), reset) + "RSET\r\n" +
			"MAIL FROM:<monitor@example.com>\r\nRCPT TO:<+15557654321@" + domain + ">\r\n" +
			fmt.Sprintf("BDAT %d LAST\r\n%s", len(next), next))
		for _, want := range []string{"250 ", "250 ", "250 2.0.0 Continue", "250 2.0.0 Session reset", "250 ", "250 ", "250 2.0.0 OK: queued"} {
			if got := d.reply(); !strings.HasPrefix(got, want) {
				t.Fatalf("round %d: got %q, want %s", i, got, want)
			}
		}
		poll.Until(t, "the phone gets the next mail's SMS", func() bool { return len(vp.Jobs()) == i+1 })
	}
	d.say("NOOP", "250")
	for i, j := range vp.Jobs() {
		if want := fmt.Sprintf("Disk %d full.", i); j.Message != want || j.To != "+15557654321" {
			t.Fatalf("job %d: %q to %s, want %q to +15557654321", i, j.Message, j.To, want)
		}
	}
}

// TestChunkCutShortIsNotSent: a BDAT LAST chunk whose connection ends
// before its declared size has arrived is a mail cut in its text: 421
// 4.4.2, the connection closed, nothing queued. go-smtp's copy of the chunk
// takes the end of the data for the chunk's end, and the first part of the
// text left as the SMS ("Pay the invoice. Do NOT" of "... Do NOT pay it").
func TestChunkCutShortIsNotSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	d := e.rawSession(key)
	d.say("MAIL FROM:<monitor@example.com>", "250")
	d.say("RCPT TO:<+15551234567@"+domain+">", "250")
	text := "Subject: x\r\n\r\nPay the invoice. Do NOT pay it twice.\r\n"
	d.write(fmt.Sprintf("BDAT %d LAST\r\n%s", len(text)+100, text))
	// The client's side of the TCP connection ends (a crash, a cut link),
	// between TLS records: TLS reads that as the end of the data.
	if err := d.raw.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got := d.reply(); !strings.HasPrefix(got, "421 4.4.2 ") {
		t.Fatalf("a chunk cut short: got %q, want 421 4.4.2", got)
	}
	if !d.closed() {
		t.Fatal("the connection stays open after the 421")
	}
	// The next mail on another connection is sent: the cut one would have
	// reached the phone before it.
	d = e.dataSession(key)
	d.write("Subject: x\r\n\r\nDisk full.\r\n.\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "250 ") {
		t.Fatalf("the next mail: got %q, want 250", got)
	}
	poll.Until(t, "the phone gets the next mail's SMS", func() bool { return len(vp.Jobs()) >= 1 })
	if jobs := vp.Jobs(); len(jobs) != 1 || jobs[0].Message != "Disk full." {
		t.Fatalf("the phone got %+v, want the next mail's SMS alone", jobs)
	}
}
