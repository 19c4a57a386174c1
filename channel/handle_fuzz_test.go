package channel

import (
	"regexp"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/phone"
)

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{7,14}$`)

// FuzzAddresses reads the addresses an agent hands the server: an
// announced iMessage handle (hello.imessage[].handle, an inbound's to) and
// an inbound's sender, read as a recipient is. What is taken is E.164 or
// one e-mail address of at most 254 bytes; holds nothing RecipientFault
// refuses (a control or invisible character, a leading '-'), since it is
// shown in the console and the API and handed back to the agent's tool as
// send.from; and reads again as itself.
func FuzzAddresses(f *testing.F) {
	for _, s := range []string{"+15551234567", "ana@example.com", "Ana@Example.COM", " +1 (555) 123-4567 ", "07400 123456",
		"ana@example", "@example.com", "a@b@c.com", "a b@example.com", "\u0130@example.com", "\u023a@example.com", ""} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, inGB bool) {
		region := ""
		if inGB {
			region = "GB"
		}
		check := func(what, out string) {
			t.Helper()
			switch {
			case !e164.MatchString(out) && (strings.Count(out, "@") != 1 || len(out) > 254):
				t.Fatalf("%s(%q, %q) = %q: neither E.164 nor an e-mail address", what, s, region, out)
			case phone.RecipientFault(out) != "":
				t.Fatalf("%s(%q, %q) = %q, which %s", what, s, region, out, phone.RecipientFault(out))
			}
		}
		if out, err := normaliseHandle(s, region); err == nil {
			check("normaliseHandle", out)
			if again, err := normaliseHandle(out, region); err != nil || again != out {
				t.Fatalf("normaliseHandle(%q, %q) = %q, which reads as %q, %v", s, region, out, again, err)
			}
		}
		for _, ch := range []string{WhatsApp, IMessage} {
			if out, err := normaliseTo(ch, s, region); err == nil {
				check("normaliseTo "+ch, out)
				if again, err := normaliseTo(ch, out, region); err != nil || again != out {
					t.Fatalf("normaliseTo(%s, %q, %q) = %q, which reads as %q, %v", ch, s, region, out, again, err)
				}
			}
		}
	})
}
