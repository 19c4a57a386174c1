package smtpd_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/poll"
)

// mailOnce sends one mail over its own session, as a client that connects
// for each try: the envelope sender, the recipients (numbers of the
// listener's domain) and the text after DATA (header and body, CRLF, without
// the final dot). It returns the reply to the text.
func (e *env) mailOnce(key, sender string, to []string, text string) string {
	e.t.Helper()
	d := e.rawSession(key)
	defer d.c.Close()
	d.say("MAIL FROM:<"+sender+">", "250")
	for _, n := range to {
		d.say("RCPT TO:<"+n+"@"+domain+">", "250")
	}
	d.say("DATA", "354")
	d.write(text + ".\r\n")
	return d.reply()
}

// untilLast waits until the phone's last job is to the number with the
// text: a mail queued after the others, so that once it is on the phone, so
// is everything queued before it.
func untilLast(t *testing.T, vp *vphone, to, text string) {
	t.Helper()
	poll.Until(t, "the last mail ("+text+") reaches the phone", func() bool {
		jobs := vp.Jobs()
		return len(jobs) > 0 && jobs[len(jobs)-1].To == to && jobs[len(jobs)-1].Message == text
	})
}

// jobs is the phone's jobs as "number text", in the order it got them.
func jobs(vp *vphone) []string {
	var out []string
	for _, j := range vp.Jobs() {
		out = append(out, j.To+" "+j.Message)
	}
	return out
}

// TestRetryWithoutMessageIDQueuesNothingTwice: a mail without a Message-ID
// but with a Date (as every mail program writes it) is keyed by a digest of
// itself. One recipient refused at DATA with a 4xx (the plan's limit) after
// another was queued: the reply says a retry does not queue that one again,
// and the client's retries, the same mail byte for byte, queue only the
// recipient not yet sent, once. Without the digest's key, each retry sent
// the first recipient's SMS again.
func TestRetryWithoutMessageIDQueuesNothingTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	if _, err := e.billing.SetPlan(id, onePlan); err != nil { // one message a month
		t.Fatal(err)
	}
	mail := "Date: Sun, 29 Nov 2026 08:00:00 +0000\r\nFrom: Monitor <monitor@example.com>\r\nTo: +15550000001@" + domain +
		", +15550000002@" + domain + "\r\nSubject: disk full\r\n\r\nThe disk of db1 is full.\r\n"
	to := []string{"+15550000001", "+15550000002"}
	for try := 1; try <= 2; try++ {
		got := e.mailOnce(key, "monitor@example.com", to, mail)
		if !strings.HasPrefix(got, "452 4.2.2 ") || !strings.Contains(got, "To +15550000002") || !strings.Contains(got, "already queued for +15550000001 (") {
			t.Fatalf("try %d over the plan: got %q, want 452 naming +15550000002, and +15550000001 queued", try, got)
		}
		if !strings.Contains(got, "(a retry of this mail unchanged, its Date too, does not queue them again)") {
			t.Errorf("try %d over the plan: got %q, want it to say a retry does not queue +15550000001 again", try, got)
		}
	}
	// The limit lifted, the client's next retry queues the second recipient.
	if _, err := e.billing.SetPlan(id, "unlimited"); err != nil {
		t.Fatal(err)
	}
	if got := e.mailOnce(key, "monitor@example.com", to, mail); !strings.HasPrefix(got, "250 ") {
		t.Fatalf("the retry within the limit: got %q, want 250", got)
	}
	if got := e.mailOnce(key, "monitor@example.com", to, mail); !strings.HasPrefix(got, "250 ") {
		t.Fatalf("one more retry: got %q, want 250", got)
	}
	e.mailOnce(key, "monitor@example.com", []string{"+15550000009"}, "Subject: last\r\n\r\nlast\r\n")
	untilLast(t, vp, "+15550000009", "last")
	want := []string{"+15550000001 The disk of db1 is full.", "+15550000002 The disk of db1 is full.", "+15550000009 last"}
	if got := jobs(vp); !slices.Equal(got, want) {
		t.Errorf("the phone got %q, want each recipient once: %q", got, want)
	}
}

// TestMailsWithoutMessageIDThatDifferAreSent: the digest that keys a mail
// without a Message-ID takes in all of the mail: two mails that differ only
// in their Date, or only in their text, or only in their envelope sender,
// are each sent, while the first sent again is not.
func TestMailsWithoutMessageIDThatDifferAreSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	to := []string{"+15550000001"}
	mail := func(date, text string) string {
		return "Date: " + date + "\r\nFrom: monitor@example.com\r\nTo: +15550000001@" + domain + "\r\nSubject: alert\r\n\r\n" + text + "\r\n"
	}
	const first, second = "Sun, 29 Nov 2026 08:00:00 +0000", "Sun, 29 Nov 2026 09:00:00 +0000"
	for _, m := range []struct{ sender, text string }{
		{"monitor@example.com", mail(first, "db1 is down")},
		{"monitor@example.com", mail(second, "db1 is down")},  // only the Date differs
		{"monitor@example.com", mail(first, "db1 is down!")},  // only the text
		{"backup@example.com", mail(first, "db1 is down")},    // only the envelope sender
		{"monitor@example.com", mail(first, "db1 is down")},   // the first again: a retry
		{"monitor@example.com", mail(second, "db1 is down!")}, // Date and text of others: a mail of its own
	} {
		if got := e.mailOnce(key, m.sender, to, m.text); !strings.HasPrefix(got, "250 ") {
			t.Fatalf("mail from %s: got %q, want 250", m.sender, got)
		}
	}
	e.mailOnce(key, "monitor@example.com", []string{"+15550000009"}, "Subject: last\r\n\r\nlast\r\n")
	untilLast(t, vp, "+15550000009", "last")
	want := []string{"+15550000001 db1 is down", "+15550000001 db1 is down", "+15550000001 db1 is down!", "+15550000001 db1 is down", "+15550000001 db1 is down!", "+15550000009 last"}
	if got := jobs(vp); !slices.Equal(got, want) {
		t.Errorf("the phone got %q, want %q (every mail but the resent first)", got, want)
	}
}

// TestMailWithNeitherMessageIDNorDateIsSentEachTime: nothing tells a
// retry of a mail with neither header from a new mail that says the same
// (a script's alert every hour): it is sent every time it arrives, and a
// partial refusal's reply says its retry queues those queued again.
func TestMailWithNeitherMessageIDNorDateIsSentEachTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	mail := "From: monitor@example.com\r\nSubject: alert\r\n\r\ndb1 is down\r\n"
	for i := range 2 {
		if got := e.mailOnce(key, "monitor@example.com", []string{"+15550000001"}, mail); !strings.HasPrefix(got, "250 ") {
			t.Fatalf("mail %d: got %q, want 250", i+1, got)
		}
	}
	poll.Until(t, "both mails reach the phone", func() bool { return len(vp.Jobs()) == 2 })
	d := e.rawSession(key)
	d.say("MAIL FROM:<monitor@example.com>", "250")
	d.say("RCPT TO:<+15550000001@"+domain+">", "250")
	d.say("RCPT TO:<+15550000003@"+domain+">", "250")
	if _, _, err := e.sms.AddOptOut(context.Background(), id, "+15550000003"); err != nil {
		t.Fatal(err)
	}
	d.say("DATA", "354")
	d.write(mail + ".\r\n")
	if got := d.reply(); !strings.Contains(got, "already queued for +15550000001 (the mail has neither Message-ID nor Date: a retry queues them again)") {
		t.Errorf("a partial refusal of a mail with neither header: got %q, want it to say a retry queues +15550000001 again", got)
	}
}
