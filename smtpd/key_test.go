package smtpd

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/simrelay/simrelay/problem"
)

// TestKeyOfMailWithoutMessageID: a mail without a Message-ID but with a
// Date is keyed by the digest of its envelope sender, Date, From, To, Cc,
// Subject and SMS text: the same mail is the same key, a change to any of
// them another key; a header outside them leaves the key. A Message-ID
// keys the mail by itself; with neither header there is no key.
func TestKeyOfMailWithoutMessageID(t *testing.T) {
	const base = "Date: Sun, 29 Nov 2026 08:00:00 +0000\nFrom: a@example.com\nTo: +15550000001@sms.test\nCc: b@example.com\nSubject: alert\n\ndb1 is down\n"
	keyOfRaw := func(sender, raw string) mailKey {
		t.Helper()
		m, err := ReadMail([]byte(strings.ReplaceAll(raw, "\n", "\r\n")))
		if err != nil {
			t.Fatal(err)
		}
		return keyOf(m, sender)
	}
	k := keyOfRaw("a@example.com", base)
	if k.kind != keyContent || k != keyOfRaw("a@example.com", base) {
		t.Fatalf("the same mail twice: %+v and %+v, want one digest key", k, keyOfRaw("a@example.com", base))
	}
	for name, c := range map[string]struct{ sender, raw string }{
		"envelope sender": {"c@example.com", base},
		"null sender":     {"", base},
		"Date":            {"a@example.com", strings.Replace(base, "08:00:00", "08:00:01", 1)},
		"From":            {"a@example.com", strings.Replace(base, "From: a@", "From: c@", 1)},
		"To":              {"a@example.com", strings.Replace(base, "To: +15550000001", "To: +15550000002", 1)},
		"Cc":              {"a@example.com", strings.Replace(base, "Cc: b@example.com\n", "", 1)},
		"Cc as To":        {"a@example.com", strings.Replace(base, "Cc: b@", "To: b@", 1)},
		"Subject":         {"a@example.com", strings.Replace(base, "alert", "alert!", 1)},
		"text":            {"a@example.com", strings.Replace(base, "down", "down!", 1)},
	} {
		if got := keyOfRaw(c.sender, c.raw); got.kind != keyContent || got == k {
			t.Errorf("%s changed: key %+v, want a digest key other than %+v", name, got, k)
		}
	}
	if got := keyOfRaw("a@example.com", "X-Mailer: x\n"+base); got != k {
		t.Errorf("a header outside the digest: key %+v, want %+v", got, k)
	}
	if got := keyOfRaw("a@example.com", "Message-ID: <m1@example.com>\n"+base); got != (mailKey{kind: keyMessageID, id: "<m1@example.com>"}) {
		t.Errorf("with a Message-ID: key %+v, want the Message-ID's", got)
	}
	if got := keyOfRaw("a@example.com", strings.Replace(base, "Date: Sun, 29 Nov 2026 08:00:00 +0000\n", "", 1)); got != (mailKey{kind: keyNone}) {
		t.Errorf("with neither Message-ID nor Date: key %+v, want none", got)
	}
}

// TestPartialRefusalReplyFitsALine: the longest reply to a partial refusal
// (a cap's hint of a month's seconds, a reason cut at maxReplyReason, nine
// recipients of 15 digits queued before) stays within RFC 5321's 512
// octets a line, whatever the retry's words of the mail's key.
func TestPartialRefusalReplyFitsALine(t *testing.T) {
	var queued []string
	for i := range 9 {
		queued = append(queued, "+99999999999999"+strconv.Itoa(i))
	}
	pe := problem.New(problem.SIMCapped, strings.Repeat("x", 400))
	pe.RetryAfter = 31 * 24 * 3600
	for _, kind := range []keyKind{keyNone, keyMessageID, keyContent} {
		var se *smtp.SMTPError
		if !errors.As(reply(pe, "+999999999999999", queued, kind, slog.New(slog.DiscardHandler)), &se) {
			t.Fatalf("key kind %d: no SMTP reply", kind)
		}
		line := fmt.Sprintf("%d %d.%d.%d %s\r\n", se.Code, se.EnhancedCode[0], se.EnhancedCode[1], se.EnhancedCode[2], se.Message)
		if len(line) > 512 || !strings.Contains(line, "+999999999999998 (") || !strings.HasSuffix(line, ")\r\n") {
			t.Errorf("key kind %d: the reply is %d octets, want at most 512: %q", kind, len(line), line)
		}
	}
}
