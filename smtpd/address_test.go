package smtpd

import (
	"errors"
	"testing"

	"github.com/emersion/go-smtp"
)

// Without a region (a company that has none) a number needs its +.
func TestParseAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Address
		code int // 0: accepted
	}{
		{in: "+15551234567@sms.test", want: Address{Phone: "+15551234567"}},
		{in: "+1-555-123-4567@SMS.Test", want: Address{Phone: "+15551234567"}},
		{in: "+15551234567+dev-pixel7@sms.test", want: Address{Phone: "+15551234567", Device: "pixel7"}},
		{in: "+15551234567+dev-a+b@sms.test", want: Address{Phone: "+15551234567", Device: "a+b"}},
		{in: "+15551234567+pool-sales@sms.test", want: Address{Phone: "+15551234567", Pool: "sales"}},
		// The prefixes are read in any case, as the domain is (a mail
		// client or a person may capitalise them); what follows is kept
		// as written: a fingerprint is compared as given.
		{in: "+15551234567+DEV-pixel7@sms.test", want: Address{Phone: "+15551234567", Device: "pixel7"}},
		{in: "+15551234567+Dev-Pixel7@sms.test", want: Address{Phone: "+15551234567", Device: "Pixel7"}},
		{in: "+15551234567+POOL-sales@sms.test", want: Address{Phone: "+15551234567", Pool: "sales"}},
		{in: "+15551234567+Pool-Sales@sms.test", want: Address{Phone: "+15551234567", Pool: "Sales"}},
		{in: "+15551234567+DEV-@sms.test", code: 550},
		{in: "+15551234567+POOL-@sms.test", code: 550},
		{in: "+15551234567+ᴅev-pixel7@sms.test", code: 550},
		{in: "15551234567@sms.test", code: 550},
		{in: "+1555@sms.test", code: 550},
		{in: "+15551234567+dev-@sms.test", code: 550},
		{in: "+15551234567+pixel7@sms.test", code: 550},
		// A + after the number says a device or pool follows: with none
		// named (a name lost in the typing) the mail is refused, not sent
		// through the default device the writer meant to avoid.
		{in: "+15551234567+@sms.test", code: 550},
		{in: "+15551234567@other.test", code: 550},
		{in: "@sms.test", code: 550},
		{in: "+15551234567", code: 550},
		// A control character names no device or pool: refused here, not
		// looked up (PostgreSQL cannot compare a text holding U+0000, so
		// the lookup answered 451, a fault a mail server retries for days).
		{in: "+15551234567+dev-pix\x00el7@sms.test", code: 550},
		{in: "+15551234567+pool-sa\x00les@sms.test", code: 550},
		{in: "+15551234567+dev-pixel\x7f@sms.test", code: 550},
		// Nor bytes that are not UTF-8, the same fault (found fuzzing).
		{in: "+15551234567+dev-pix\xd5el7@sms.test", code: 550},
	} {
		got, err := ParseAddressIn(tc.in, "sms.test", "")
		var se *smtp.SMTPError
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("%q: got %v, want %+v", tc.in, err, tc.want)
		case tc.code == 0 && got != tc.want:
			t.Errorf("%q: got %+v, want %+v", tc.in, got, tc.want)
		case tc.code != 0 && (!errors.As(err, &se) || se.Code != tc.code):
			t.Errorf("%q: got %+v, %v; want SMTP %d", tc.in, got, err, tc.code)
		}
	}
}

// In a company's region a number may be written without its +, as the
// API takes it; a number the numbering plan has not is refused with 550.
func TestParseAddressInRegion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Address
		code int // 0: accepted
	}{
		{in: "07400123456@sms.test", want: Address{Phone: "+447400123456"}},
		{in: "07400-123-456+dev-pixel7@sms.test", want: Address{Phone: "+447400123456", Device: "pixel7"}},
		{in: "07400-123-456+DEV-pixel7@sms.test", want: Address{Phone: "+447400123456", Device: "pixel7"}},
		{in: "+447400123456+pool-sales@sms.test", want: Address{Phone: "+447400123456", Pool: "sales"}},
		{in: "+15551234567@sms.test", want: Address{Phone: "+15551234567"}}, // with its +: today's rule, fictional numbers included
		{in: "0740012@sms.test", code: 550},
		{in: "07400123456+pixel7@sms.test", code: 550},
		{in: "07400123456+@sms.test", code: 550},
	} {
		got, err := ParseAddressIn(tc.in, "sms.test", "GB")
		var se *smtp.SMTPError
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("%q: got %v, want %+v", tc.in, err, tc.want)
		case tc.code == 0 && got != tc.want:
			t.Errorf("%q: got %+v, want %+v", tc.in, got, tc.want)
		case tc.code != 0 && (!errors.As(err, &se) || se.Code != tc.code):
			t.Errorf("%q: got %+v, %v; want SMTP %d", tc.in, got, err, tc.code)
		}
	}
}
