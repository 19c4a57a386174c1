package smtpd_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/pacing"
)

// jobsTo is the numbers of the phone's jobs, in the order it got them.
func jobsTo(vp *vphone) []string {
	var to []string
	for _, j := range vp.Jobs() {
		to = append(to, j.To)
	}
	return to
}

// TestOneRefusedRecipientOfSeveral: an opted-out number is refused at
// RCPT, for itself alone (550 5.7.1 naming it), and the mail goes to the
// other recipients, the one after it in the list too. A mail whose every
// recipient was refused has no DATA. The refused RCPT counts in the key's
// rate limit, as every RCPT does. The refusal used to come at DATA: the
// recipients after the opted-out one were never sent, and the sending
// server bounced the whole mail.
func TestOneRefusedRecipientOfSeveral(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{general: pacing.Rate{Limit: 4, Window: time.Hour}})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	if _, _, err := e.sms.AddOptOut(context.Background(), id, "+15550000002"); err != nil {
		t.Fatal(err)
	}
	d := e.rawSession(key)
	d.say("MAIL FROM:<monitor@example.com>", "250")
	d.say("RCPT TO:<+15550000001@"+domain+">", "250")
	d.write("RCPT TO:<+15550000002@" + domain + ">\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "550 5.7.1 ") || !strings.Contains(got, "To +15550000002") || !strings.Contains(got, "opted out") {
		t.Fatalf("RCPT of the opted-out number: got %q, want 550 5.7.1 naming it and the opt-out", got)
	}
	d.say("RCPT TO:<+15550000003@"+domain+">", "250")
	d.say("DATA", "354")
	d.write("Subject: note\r\n\r\nhello\r\n.\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "250 ") {
		t.Fatalf("the mail to the others: got %q, want 250", got)
	}
	poll.Until(t, "both other recipients' SMS reach the phone", func() bool { return len(vp.Jobs()) == 2 })
	if got := jobsTo(vp); !slices.Equal(got, []string{"+15550000001", "+15550000003"}) {
		t.Errorf("the phone got jobs to %v, want +15550000001 and +15550000003", got)
	}

	// Only the opted-out recipient: no recipient was taken, so no DATA.
	d.say("MAIL FROM:<monitor@example.com>", "250")
	d.say("RCPT TO:<+15550000002@"+domain+">", "550 5.7.1 ")
	d.say("DATA", "502 5.5.1 ")
	// That was the window's fourth RCPT, refused or not: the fifth is over it.
	d.say("RCPT TO:<+15550000004@"+domain+">", "452 4.7.0 ")
}

// TestOptOutBetweenRcptAndData: a number that opts out after its RCPT was
// taken is still refused at DATA, by the send's own check of the list: the
// reply names it and those queued before it, which stay queued; the
// recipients after it are not sent.
func TestOptOutBetweenRcptAndData(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	d := e.rawSession(key)
	d.say("MAIL FROM:<monitor@example.com>", "250")
	for _, to := range []string{"+15550000001", "+15550000002", "+15550000003"} {
		d.say("RCPT TO:<"+to+"@"+domain+">", "250")
	}
	if _, _, err := e.sms.AddOptOut(context.Background(), id, "+15550000002"); err != nil {
		t.Fatal(err)
	}
	d.say("DATA", "354")
	d.write("Subject: note\r\n\r\nhello\r\n.\r\n")
	got := d.reply()
	if !strings.HasPrefix(got, "550 5.7.1 ") || !strings.Contains(got, "To +15550000002") || !strings.Contains(got, "already queued for +15550000001") {
		t.Fatalf("DATA after the opt-out: got %q, want 550 5.7.1 naming +15550000002 and the queued +15550000001", got)
	}
	// The mail has neither Message-ID nor Date: its retry queues
	// +15550000001 again, and the reply says so rather than promise the
	// retry is safe.
	if !strings.Contains(got, "the mail has neither Message-ID nor Date: a retry queues them again") || strings.Contains(got, "does not queue them again") {
		t.Errorf("DATA after the opt-out, a mail with neither Message-ID nor Date: got %q, want it to say a retry queues them again", got)
	}
	// A later mail is queued after whatever the refused one queued: once it
	// is on the phone, so is everything before it.
	d.say("MAIL FROM:<monitor@example.com>", "250")
	d.say("RCPT TO:<+15550000004@"+domain+">", "250")
	d.say("DATA", "354")
	d.write("Subject: note\r\n\r\nlater\r\n.\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "250 ") {
		t.Fatalf("the later mail: got %q, want 250", got)
	}
	poll.Until(t, "the later mail reaches the phone", func() bool {
		jobs := vp.Jobs()
		return len(jobs) > 0 && jobs[len(jobs)-1].To == "+15550000004"
	})
	if got := jobsTo(vp); !slices.Equal(got, []string{"+15550000001", "+15550000004"}) {
		t.Errorf("the phone got jobs to %v, want +15550000001 (queued before the refusal) and +15550000004", got)
	}

	// With a Message-ID the retry is safe, and the reply says that.
	d.say("MAIL FROM:<monitor@example.com>", "250")
	d.say("RCPT TO:<+15550000005@"+domain+">", "250")
	d.say("RCPT TO:<+15550000006@"+domain+">", "250")
	if _, _, err := e.sms.AddOptOut(context.Background(), id, "+15550000006"); err != nil {
		t.Fatal(err)
	}
	d.say("DATA", "354")
	d.write("Message-ID: <retry-1@example.com>\r\nSubject: note\r\n\r\nagain\r\n.\r\n")
	if got := d.reply(); !strings.HasPrefix(got, "550 5.7.1 ") || !strings.Contains(got, "already queued for +15550000005 (a retry of this mail with its Message-ID does not queue them again)") {
		t.Errorf("DATA after the opt-out, a mail with a Message-ID: got %q, want it to say its retry does not queue +15550000005 again", got)
	}
}
