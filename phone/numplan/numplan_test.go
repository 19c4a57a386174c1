package numplan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nyaruka/phonenumbers"

	"github.com/simrelay/simrelay/phone"
)

func TestCheckRegion(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"GB": "GB", " gb ": "GB", "us": "US", "": ""} {
		if got, err := CheckRegion(in); err != nil || got != want {
			t.Errorf("CheckRegion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"GBR", "XX", "ZZ", "G", "1", "uſ", "ｇｂ"} {
		if got, err := CheckRegion(in); err == nil {
			t.Errorf("CheckRegion(%q) = %q, want an error", in, got)
		}
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, region, want string
	}{
		{"07400 123456", "GB", "+447400123456"},
		{"(020) 7946-0958", "GB", "+442079460958"},
		{"0044 7400 123456", "GB", "+447400123456"},
		{"+44 7400 123456", "GB", "+447400123456"},
		{"+1 (415) 555-0100", "GB", "+14155550100"}, // another country's number, with its +
		{"07700 900123", "GB", "+447700900123"},     // Ofcom's drama range: a right length is enough
		{"+1 (555) 123-4567", "GB", "+15551234567"}, // with its +: today's rule, fictional numbers included
		{"07400 123456", "", ""},                    // no region: today's rule, no +
		{"(415) 555-0100", "US", "+14155550100"},
		{"07700 900123", "", ""}, // no region: today's rule, no +
		{"+15551234567", "", "+15551234567"},
		{"07700 9001", "GB", ""},       // too short
		{"07700 9001234567", "GB", ""}, // too long
		{"7946 0958", "GB", ""},        // a local number, no area code
		{"07700 ABC123", "GB", ""},
		{"07700 900123 ext. 5", "GB", ""},
		{"", "GB", ""},
		// A national prefix in brackets after the country code is dropped
		// where the number without it is valid, with a region or without;
		// Italy dials its 0 from abroad too.
		{"+44 (0) 7400 123456", "", "+447400123456"},
		{"+44 (0)20 7946 0958", "GB", "+442079460958"},
		{"+49 (0)151 23456789", "", "+4915123456789"},
		{"+33 ( 0 ) 6 12 34 56 78", "", "+33612345678"},
		{"+39 (0)6 1234 5678", "", "+390612345678"},
		{"+1 (0) 212 555 0100", "", "+102125550100"}, // no valid reading without it: the plain rule
		{"+44 (0) 7400 123456 x", "", ""},
	}
	for _, c := range cases {
		got, err := Normalize(c.in, c.region)
		if (err == nil) != (c.want != "") || got != c.want {
			t.Errorf("Normalize(%q, %q) = %q, %v; want %q", c.in, c.region, got, err, c.want)
		}
	}
	// No region is Normalize, error included.
	for _, in := range []string{"+1234567", "15551234567", " +1 (555) 123-4567 ", "+0123456789"} {
		a, errA := Normalize(in, "")
		b, errB := phone.Normalize(in)
		if a != b || (errA == nil) != (errB == nil) || (errA != nil && errA.Error() != errB.Error()) {
			t.Errorf("Normalize(%q, \"\") = %q, %v; phone.Normalize gives %q, %v", in, a, errA, b, errB)
		}
	}
}

func TestSender(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, region, want string
		ok               bool
	}{
		{"07400123456", "GB", "+447400123456", true},  // national
		{"447400123456", "GB", "+447400123456", true}, // the + dropped
		{"15551234567", "GB", "+15551234567", true},   // the + dropped, as without a region
		// The + dropped from a number of the region's own country that the
		// plan would also take for a long national one.
		{"4915123456789", "DE", "+4915123456789", true},
		{"491701234567", "DE", "+491701234567", true},
		{"015123456789", "DE", "+4915123456789", true}, // national
		// National numbers that begin with the country code's digits: read
		// after a + they are no valid number, so they stay national.
		{"3931234567", "IT", "+393931234567", true},
		{"9198765432", "IN", "+919198765432", true},
		{"+15551234567", "GB", "+15551234567", true},
		{"72345", "GB", "", false}, // a short code
		{"BANK", "GB", "", false},
		{"07400123456", "", "", false}, // no region: today's rule
		{"15551234567", "", "+15551234567", true},
	}
	for _, c := range cases {
		got, ok := Sender(c.in, c.region)
		if ok != c.ok || got != c.want {
			t.Errorf("Sender(%q, %q) = %q, %v; want %q, %v", c.in, c.region, got, ok, c.want, c.ok)
		}
	}
}

func TestReported(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, region, want string }{
		{"07400 654321", "GB", "+447400654321"},
		{"+1 555 000 1111", "GB", "+15550001111"}, // unknown to the data: today's rule
		{"+1 555 000 1111", "", "+15550001111"},
		{"07400 654321", "", ""},
		{"12345", "GB", ""},
		{"4915123456789", "DE", "+4915123456789"}, // a WhatsApp number: the + dropped
		{"015123456789", "DE", "+4915123456789"},
		{"3931234567", "IT", "+393931234567"}, // an Italian mobile, national
		{"9198765432", "IN", "+919198765432"},
	}
	for _, c := range cases {
		got, err := Reported(c.in, c.region)
		if (err == nil) != (c.want != "") || got != c.want {
			t.Errorf("Reported(%q, %q) = %q, %v; want %q", c.in, c.region, got, err, c.want)
		}
	}
}

func TestTypeAndDisplay(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, typ, display string }{
		{"+442079460958", "fixed_line", "+44 20 7946 0958"},
		{"+447400123456", "mobile", "+44 7400 123456"},
		{"+14155550100", "fixed_line_or_mobile", "+1 415-555-0100"},
		{"+15551234567", "", "+1 555-123-4567"}, // fictional: no type
		{"BANK", "", "BANK"},
		{"72345", "", "72345"},
		{"ana@example.com", "", "ana@example.com"},
		{"+44 20 7946 0958", "", "+44 20 7946 0958"}, // not E.164: as given
	}
	for _, c := range cases {
		if got := Type(c.in); got != c.typ {
			t.Errorf("Type(%q) = %q, want %q", c.in, got, c.typ)
		}
		if got := Display(c.in); got != c.display {
			t.Errorf("Display(%q) = %q, want %q", c.in, got, c.display)
		}
	}
}

func BenchmarkNormalize(b *testing.B) {
	for b.Loop() {
		if _, err := Normalize("07400 123456", "GB"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkType(b *testing.B) {
	for b.Loop() {
		if Type("+447400123456") != "mobile" {
			b.Fatal("not mobile")
		}
	}
}

func BenchmarkPhoneNormalize(b *testing.B) {
	for b.Loop() {
		if _, err := phone.Normalize("+44 7400 123456"); err != nil {
			b.Fatal(err)
		}
	}
}

// The memo answers a number it read once without reading it again, and
// holds at most maxMemo numbers.
func TestMemoIsBounded(t *testing.T) {
	t.Parallel()
	var m memo
	reads := 0
	read := func() string { reads++; return "mobile" }
	for range 3 {
		if m.get("+447400123456", read) != "mobile" {
			t.Fatal("wrong answer")
		}
	}
	if reads != 1 {
		t.Fatalf("one number read %d times, want once", reads)
	}
	for i := range maxMemo + 10 {
		m.get(fmt.Sprint(i), read)
		if len(m.m) > maxMemo {
			t.Fatalf("the memo holds %d numbers, more than %d", len(m.m), maxMemo)
		}
	}
}

func TestCheckCountry(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"US": "US", " us ": "US", "usa": "USA", "GBR": "GBR", "gb": "GB", "UK": "UK", "uk": "UK",
		"DE": "DE", "deu": "DEU", "XK": "XK", "": "", "  ": ""} {
		if got, err := CheckCountry(in); err != nil || got != want {
			t.Errorf("CheckCountry(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"ZZ", "ZZZ", "QQ", "XA", "AA", "AAA", "EU", "UN", "YU", "SU", "AQ", "ATA", "BUR", "ROM", "U5", "1", "001", "G", "GERM", "ÜS", "uſ", "uſa", "ＵＳ"} {
		if got, err := CheckCountry(in); err == nil {
			t.Errorf("CheckCountry(%q) = %q, want an error", in, got)
		}
	}
	// Every region a company may name for its numbers is a country it may
	// name, with two letters or three.
	for r := range phonenumbers.GetSupportedRegions() {
		if _, err := CheckCountry(r); err != nil {
			t.Errorf("CheckCountry(%q): %v, want it taken (CheckRegion takes it)", r, err)
		}
	}
}

// Only E.164 numbers enter the memos, so that each entry is a number of at
// most 16 bytes and its short answer: Display and Type are called on every
// message's address, and a WhatsApp or iMessage sender that is no number
// (a name, an e-mail address) is kept as given, up to 254 bytes. Such a
// sender costs one quick check to answer and is not remembered.
func TestMemoHoldsOnlyNumbers(t *testing.T) {
	t.Parallel()
	sender := strings.Repeat("a", 240) + "@example.com"
	if got := Display(sender); got != sender {
		t.Fatalf("Display(%q) = %q, want it as given", sender, got)
	}
	if got := Type(sender); got != "" {
		t.Fatalf("Type(%q) = %q, want none", sender, got)
	}
	for name, m := range map[string]*memo{"displays": &displays, "types": &types} {
		m.mu.Lock()
		_, held := m.m[sender]
		m.mu.Unlock()
		if held {
			t.Errorf("the %s memo holds a sender that is no number", name)
		}
	}
	if got := Display("+447700900123"); got != "+44 7700 900123" {
		t.Fatalf("Display = %q", got)
	}
}

// isE164 is phone.Normalize's canonical form, read without allocating: a
// page of history asks it of every message's number, twice. (Not parallel:
// AllocsPerRun refuses to run beside other tests.)
func TestIsE164(t *testing.T) {
	for _, s := range []string{"", "+", "+1", "+1234567", "+12345678", "+123456789012345", "+1234567890123456",
		"+01234567890", "+1 555 123 4567", " +15551234567", "+15551234567 ", "+1555123456x", "+1555-1234567",
		"15551234567", "++15551234567", "+١٥٥٥١٢٣٤٥٦٧", "+15551234567\x00", "+447700900123", "bank@example.com"} {
		v, err := phone.Normalize(s)
		if got, want := isE164(s), err == nil && v == s; got != want {
			t.Errorf("isE164(%q) = %v, want %v", s, got, want)
		}
	}
	for _, s := range []string{"+447700900123", "+1 555 123 4567", strings.Repeat("a", 240) + "@example.com", "+1555123456x"} {
		if n := testing.AllocsPerRun(100, func() { isE164Sink = isE164(s) }); n != 0 {
			t.Errorf("isE164(%q) allocates %v times a call, want 0", s, n)
		}
	}
}

var isE164Sink bool
