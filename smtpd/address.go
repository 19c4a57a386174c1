package smtpd

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-smtp"

	"github.com/simrelay/simrelay/phone/numplan"
)

// Selector prefixes of an address's second part: +15551234567+dev-pixel7@domain,
// read in any case (+DEV-pixel7); what follows them is kept as written.
const (
	devicePrefix = "dev-"
	poolPrefix   = "pool-"
)

// maxAddress bounds a recipient's length (RFC 5321's path limit).
const maxAddress = 256

// Address is a recipient: the number to text and, when the address names
// one, the device or pool to send through.
type Address struct {
	Phone  string // E.164, normalised
	Device string // a device fingerprint; "" for the company's default
	Pool   string // a sender pool's name; "" for none
}

// ParseAddressIn reads +E164[+dev-FINGERPRINT|+pool-NAME]@domain for a
// company whose region is region. Spaces, dashes and dots in the number are
// allowed as phone.Normalize allows them. A number without its + is read in
// the region (numplan.Normalize), so NATIONAL[+dev-...|+pool-...]@domain
// works too, "07400123456@domain" in GB texting +447400123456; with region
// "" (a company without one) it is refused, as on the API.
func ParseAddressIn(addr, domain, region string) (Address, error) {
	return parseAddress(addr, domain, func() (string, error) { return region, nil })
}

// parseAddress is ParseAddressIn with the company's region asked of region
// only for a number written without its +: the only one it is read in.
func parseAddress(addr, domain string, region func() (string, error)) (Address, error) {
	if len(addr) > maxAddress {
		return Address{}, badAddress("The address is too long.")
	}
	// No number, fingerprint or pool name holds a control character; one
	// looked up would be a fault on PostgreSQL (it cannot compare a text
	// holding U+0000), and 451 has a mail server retry for days.
	if strings.ContainsFunc(addr, unicode.IsControl) {
		return Address{}, badAddress("The address holds a control character.")
	}
	// Nor bytes that are not UTF-8, which PostgreSQL refuses to read as
	// text: the same fault.
	if !utf8.ValidString(addr) {
		return Address{}, badAddress("The address is not UTF-8.")
	}
	local, dom, ok := cutLast(addr, "@")
	if !ok || local == "" {
		return Address{}, badAddress("Write the recipient as +15551234567@" + domain + ".")
	}
	if !strings.EqualFold(dom, domain) {
		return Address{}, &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 2},
			Message: "This server takes mail for @" + domain + " only."}
	}
	var number, selector, in string
	var named bool // a + after the number: a device or pool named, if only as ""
	if strings.HasPrefix(local, "+") {
		number, selector, named = strings.Cut(local[1:], "+")
		number = "+" + number
	} else {
		var err error
		if in, err = region(); err != nil {
			return Address{}, err
		}
		if in == "" {
			return Address{}, badAddress("The number must be in E.164 form with its +, e.g. +15551234567@" + domain + ".")
		}
		number, selector, named = strings.Cut(local, "+")
	}
	n, err := numplan.Normalize(number, in)
	if err != nil && in != "" {
		return Address{}, badAddress("The number " + err.Error() + " (read in " + in + ").")
	}
	if err != nil {
		return Address{}, badAddress("The number is not an E.164 number: + then 8 to 15 digits, e.g. +15551234567@" + domain + ".")
	}
	a := Address{Phone: n}
	switch {
	case !named:
	case hasPrefixASCIIFold(selector, devicePrefix) && len(selector) > len(devicePrefix):
		a.Device = selector[len(devicePrefix):]
	case hasPrefixASCIIFold(selector, poolPrefix) && len(selector) > len(poolPrefix):
		a.Pool = selector[len(poolPrefix):]
	default:
		return Address{}, badAddress("After the number, name a device as +dev-FINGERPRINT or a pool as +pool-NAME, e.g. " + n + "+dev-pixel7@" + domain + ".")
	}
	return a, nil
}

// hasPrefixASCIIFold reports whether s begins with prefix (lower-case
// ASCII), its ASCII letters in any case: the selector prefixes are read as
// mail reads a local part's fixed words, without case (+DEV-pixel7,
// +Pool-sales), as the domain is; only ASCII letters fold, so no Unicode
// look-alike of a letter passes for one.
func hasPrefixASCIIFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// badAddress is the reply to a recipient whose form the listener cannot read.
func badAddress(msg string) *smtp.SMTPError {
	return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 3}, Message: msg}
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}
