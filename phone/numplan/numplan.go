// Package numplan reads phone numbers as people write them, in a country's
// numbering plan, with github.com/nyaruka/phonenumbers (the Go port of
// libphonenumber): a company's region, national numbers, a number's type
// and its form for reading. It is apart from package phone so that what
// needs only phone's E.164 rule (simrelay-agent) does not carry the
// numbering data (about 2.6 MB of binary, 10 ms and 2.5 MB at start).
package numplan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nyaruka/phonenumbers"
	"golang.org/x/text/language"

	"github.com/simrelay/simrelay/phone"
)

// A region is a company's default country for numbers written without their
// country code: an ISO 3166 alpha-2 code the numbering data knows ("GB").
// The empty region is today's rule, phone.Normalize and phone.NormalizeSender exactly:
// the server never guesses a country a company did not name.

// ErrRegion explains the accepted form of a region.
var ErrRegion = errors.New("must be a two-letter country code such as GB, or empty for none")

// maxNumberLen bounds what is handed to the numbering library (which caps
// its own input at 250 characters): no written number is longer.
const maxNumberLen = 64

// CheckRegion returns r upper-cased when the numbering data knows it, "" for
// "" (no region), and ErrRegion otherwise.
func CheckRegion(r string) (string, error) {
	r, ok := upperASCII(strings.TrimSpace(r))
	if r == "" && ok {
		return "", nil
	}
	if !ok || len(r) != 2 || !phonenumbers.GetSupportedRegions()[r] {
		return "", ErrRegion
	}
	return r, nil
}

// upperASCII upper-cases s when it is ASCII, and reports false otherwise:
// strings.ToUpper would take letters that only fold to a code's ("uſ", with
// the long s, is "US" to it) as that code.
func upperASCII(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return "", false
		}
	}
	return strings.ToUpper(s), true
}

// ErrCountry explains the accepted form of a country code.
var ErrCountry = errors.New("must be the ISO 3166 code of a country with a telephone numbering plan, two or three letters such as US or USA")

// CheckCountry returns c upper-cased when it is an ISO 3166 alpha-2 or
// alpha-3 code of a region the numbering data knows (the regions
// CheckRegion takes, written with two letters or three: "US", "usa"), ""
// for "" (none), and ErrCountry otherwise: a made-up code ("ZZ"), one for
// private use, a withdrawn one ("YU"), or a territory with no numbering
// plan of its own (Antarctica's "AQ"). "UK", which ISO 3166 reserves for
// the United Kingdom (GB) at its request and many people write, is taken
// as it was before codes were checked.
func CheckCountry(c string) (string, error) {
	c, ok := upperASCII(strings.TrimSpace(c))
	switch {
	case !ok:
		return "", ErrCountry
	case c == "" || c == "UK":
		return c, nil
	case len(c) < 2 || len(c) > 3 || strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "":
		return "", ErrCountry
	}
	r, err := language.ParseRegion(c)
	if err != nil {
		return "", ErrCountry
	}
	// ParseRegion maps a code to its region, a withdrawn one to its
	// successor; only the region's own code, in the form written, is it.
	own := r.String()
	if len(c) == 3 {
		own = r.ISO3()
	}
	if c != own || !phonenumbers.GetSupportedRegions()[r.String()] {
		return "", ErrCountry
	}
	return c, nil
}

// Normalize returns s in E.164 form, reading a number written without its
// country code in region: "07700 900123" in GB is +447700900123, and so is
// "0044 7700 900123". With region "" it is phone.Normalize, and a number
// written with its + is read by phone.Normalize's rule whatever the region,
// so naming a region never refuses an E.164 number that was taken before
// (North America's fictional 555 numbers included). A national number must
// use phone.Normalize's characters (digits, spaces, dashes, dots and
// brackets) and have a length its country's numbering plan allows: a wrong
// length is refused saying so. It need not be in a range the numbering data
// knows as allocated: that data lags the regulators' new ranges, and test
// ranges such as Ofcom's 07700 900xxx are what integrators try first.
//
// A national prefix written in brackets after the country code, as many
// people write their number ("+44 (0)20 7946 0958", "+49 (0)151 ..."), is
// dropped where the number without it is valid: the plain rule kept its 0
// (+4402079460958, a number no phone reaches). Italy's numbers, whose 0 is
// dialled from abroad too, keep it ("+39 (0)6 ..." is +3906...), as the
// numbering plan says.
func Normalize(s, region string) (string, error) {
	if region == "" || strings.HasPrefix(strings.TrimSpace(s), "+") {
		plain, err := phone.Normalize(s)
		if err != nil || !strings.Contains(strings.ReplaceAll(s, " ", ""), "(0)") {
			return plain, err
		}
		return bracketedPrefix(s, plain), nil
	}
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("must be a phone number: national as written in %s, or + and the country code (spaces, dashes, dots and brackets are allowed)", region)
	if s == "" || len(s) > maxNumberLen {
		return "", bad
	}
	for i, r := range s {
		switch {
		case r >= '0' && r <= '9', r == '+' && i == 0:
		case r == ' ' || r == '-' || r == '.' || r == '(' || r == ')':
		default:
			return "", bad
		}
	}
	n, err := phonenumbers.Parse(s, region)
	if err != nil {
		return "", bad
	}
	switch phonenumbers.IsPossibleNumberWithReason(n) {
	case phonenumbers.IS_POSSIBLE:
	case phonenumbers.TOO_SHORT, phonenumbers.IS_POSSIBLE_LOCAL_ONLY:
		return "", errors.New("is too short for a phone number of its country (write the area code, or + and the country code)")
	case phonenumbers.TOO_LONG:
		return "", errors.New("is too long for a phone number of its country")
	default:
		return "", bad
	}
	if n.GetItalianLeadingZero() && !phonenumbers.IsValidNumber(n) {
		// The national prefix could not be taken off (what is left after
		// it is too short), so the library kept the 0 in the number.
		return "", errors.New("is too short for a phone number of its country (write the area code, or + and the country code)")
	}
	out, err := phone.Normalize(phonenumbers.Format(n, phonenumbers.E164))
	if err != nil {
		return "", bad
	}
	return out, nil
}

// bracketedPrefix is s, an international number that writes a bracketed
// (0) and reads as plain by phone.Normalize, as the numbering plan reads
// it: without the national prefix where that is a valid number (the
// library drops a prefix only where the country dials without it), else
// plain.
func bracketedPrefix(s, plain string) string {
	n, err := phonenumbers.Parse(s, "ZZ")
	if err != nil || !phonenumbers.IsValidNumber(n) {
		return plain
	}
	out, err := phone.Normalize(phonenumbers.Format(n, phonenumbers.E164))
	if err != nil {
		return plain
	}
	return out
}

// Sender reads the sender a phone reports for a received message, as
// phone.NormalizeSender does, reading first a national form in region: with GB,
// "07700900123" is +447700900123, while "447700900123" (the + dropped) is
// too long to be national and is read as phone.NormalizeSender reads it. With
// region "" it is phone.NormalizeSender. Digits that begin with the
// region's own country code and make a valid number after a + are that
// number with its + dropped, even where the plan would also take them for a
// long national number: "4915123456789" in DE is +4915123456789, not
// +494915123456789, so a STOP from it names the number sends use. ok is
// false for a sender that is no number (a short code, a name), which
// callers keep as given.
func Sender(s, region string) (n string, ok bool) {
	if region != "" && plusDropped(s, region) {
		return phone.NormalizeSender(s)
	}
	if region != "" {
		if n, err := Normalize(s, region); err == nil {
			return n, true
		}
	}
	return phone.NormalizeSender(s)
}

// plusDropped reports whether s is only digits that begin with region's
// country code and are a valid number of that code read after a +. Valid,
// not merely of a possible length: a national number that begins with the
// country code's digits (an Italian mobile 393..., an Indian 91...) read
// after a + is too short for its plan, and stays national.
func plusDropped(s, region string) bool {
	s = strings.TrimSpace(s)
	cc := strconv.Itoa(phonenumbers.GetCountryCodeForRegion(region))
	if cc == "0" || !strings.HasPrefix(s, cc) {
		return false
	}
	if _, ok := phone.NormalizeSender(s); !ok {
		return false
	}
	n, err := phonenumbers.Parse("+"+s, "")
	return err == nil && phonenumbers.IsValidNumber(n)
}

// Reported reads a number a device reports (its own number, the number a
// message reached): in region, as Normalize does, and when that fails by
// phone.Normalize's rule, so that a device is never refused a number it
// could report before its company set a region, whatever the numbering
// data says of it. Digits that begin with the region's country code are
// read as Sender reads them: a WhatsApp number comes as "4915123456789",
// which in DE is +4915123456789.
func Reported(s, region string) (string, error) {
	if region != "" && plusDropped(s, region) {
		return phone.Normalize("+" + strings.TrimSpace(s))
	}
	if n, err := Normalize(s, region); err == nil {
		return n, nil
	}
	return phone.Normalize(s)
}

// numberTypes names the library's number types in the API's words.
var numberTypes = map[phonenumbers.PhoneNumberType]string{
	phonenumbers.MOBILE:               "mobile",
	phonenumbers.FIXED_LINE:           "fixed_line",
	phonenumbers.FIXED_LINE_OR_MOBILE: "fixed_line_or_mobile",
	phonenumbers.TOLL_FREE:            "toll_free",
	phonenumbers.PREMIUM_RATE:         "premium_rate",
	phonenumbers.SHARED_COST:          "shared_cost",
	phonenumbers.VOIP:                 "voip",
	phonenumbers.PERSONAL_NUMBER:      "personal_number",
	phonenumbers.PAGER:                "pager",
	phonenumbers.UAN:                  "uan",
	phonenumbers.VOICEMAIL:            "voicemail",
}

// Type names the kind of an E.164 number: mobile, fixed_line,
// fixed_line_or_mobile (where the numbering plan does not tell them apart,
// as in North America), toll_free, premium_rate, shared_cost, voip,
// personal_number, pager, uan or voicemail; "" where the numbering data does
// not know the number (a fictional one such as +15551234567 included) and
// for anything that is not an E.164 number (a short code, a name, an e-mail).
func Type(e164 string) string {
	if !isE164(e164) {
		return ""
	}
	return types.get(e164, func() string {
		n, ok := parsed(e164)
		if !ok {
			return ""
		}
		return numberTypes[phonenumbers.GetNumberType(n)]
	})
}

// Display formats an E.164 number for reading, in international format with
// its country's grouping ("+44 7700 900123"); anything else comes back as
// given.
func Display(e164 string) string {
	if !isE164(e164) {
		return e164
	}
	return displays.get(e164, func() string {
		n, ok := parsed(e164)
		if !ok {
			return e164
		}
		return phonenumbers.Format(n, phonenumbers.INTERNATIONAL)
	})
}

// maxMemo bounds each memo: an entry is an E.164 number (at most 16 bytes;
// anything else is answered without the memo) and a short answer, under
// 100 bytes, so at most about 6 MB each.
const maxMemo = 1 << 16

// Reading a number with the numbering data costs tens of microseconds, and
// a page of history or of the console names the same few numbers again and
// again (a history page is one conversation), so Type and Display keep
// their answers by number. A memo that fills up starts over.
var types, displays memo

type memo struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *memo) get(key string, compute func() string) string {
	c.mu.Lock()
	v, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = compute()
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxMemo {
		c.m = make(map[string]string)
	}
	// A clone: key may share the memory of a whole stored record.
	c.m[strings.Clone(key)] = v
	c.mu.Unlock()
	return v
}

// isE164 reports whether s is an E.164 number as stored ("+" and 8 to 15
// digits, the first not 0: phone.Normalize's form, which it gives back
// unchanged): a quick check, which keeps whatever else an address may be (a
// sender's name or e-mail address, up to 254 bytes) out of the memos. It
// reads the bytes in place: Type and Display ask it of every number a page
// shows, and building Normalize's copy to compare allocated each time.
func isE164(s string) bool {
	if len(s) < 9 || len(s) > 16 || s[0] != '+' || s[1] == '0' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parsed reads an E.164 number (isE164) with the numbering data.
func parsed(e164 string) (*phonenumbers.PhoneNumber, bool) {
	n, err := phonenumbers.Parse(e164, "")
	return n, err == nil
}
