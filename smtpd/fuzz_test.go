package smtpd

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/emersion/go-smtp"

	"github.com/simrelay/simrelay/phone"
	"github.com/simrelay/simrelay/phone/numplan"
)

// The fuzz tests run their seeds (the cases of the tests beside them, and
// the crashers found before, in testdata/fuzz) with every go test; with
// -fuzz they read mail a stranger could send.

// layoutRunes are the characters ReadMail promises never to leave in the
// SMS (docs/email.md): byte-order marks and no-break spaces, each of which
// would make the SMS UCS-2.
const layoutRunes = "\uFEFF\u00a0\u202f\u2007"

func FuzzReadMail(f *testing.F) {
	for _, tc := range readMailCases {
		f.Add([]byte(tc.raw))
		f.Add([]byte(strings.ReplaceAll(tc.raw, "\n", "\r\n")))
	}
	f.Add([]byte("Subject: x\nContent-Type: multipart/mixed; boundary=a\n\n--a\nContent-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/plain; charset=koi8-r; format=flowed; delsp=yes\nContent-Transfer-Encoding: quoted-printable\n\n=F0=D2 \n=C9\n--b--\n--a--\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := ReadMail(raw)
		if err != nil {
			return
		}
		if !utf8.ValidString(m.Text) {
			t.Errorf("text %q is not UTF-8", m.Text)
		}
		if i := strings.IndexAny(m.Text, layoutRunes); i >= 0 {
			t.Errorf("text %q keeps %q", m.Text, []rune(m.Text[i:])[0])
		}
		// A charset turns a byte into at most 3 of UTF-8 (U+FFFD for a
		// byte it cannot read), and a link's address is written once per
		// time it is in the mail: a mail's text is never much more than it.
		if len(m.Text) > 3*len(raw) {
			t.Errorf("text of %d bytes from a mail of %d", len(m.Text), len(raw))
		}
	})
}

func FuzzHTMLText(f *testing.F) {
	for _, tc := range readMailCases {
		if _, body, ok := strings.Cut(tc.raw, "\n\n"); ok && strings.Contains(tc.raw, "text/html") {
			f.Add(body)
		}
	}
	f.Add(`<a href="https://x.test/">a<a href="http://y.test">b</a></a><div class=gmail_quote>q</div>`)
	f.Add("<script>x<blockquote></script>y</blockquote>z<br/>&amp;&#0;&#xD800;")
	f.Add(`<table><tr><td><font style="display:none"><a href="https://x.test/">a<div>b</font>c</a><td>d<li>e<h1>f<h2>g</b></table></p>`)
	f.Fuzz(func(t *testing.T, src string) {
		for _, links := range []bool{true, false} {
			got := htmlText(src, links)
			if utf8.ValidString(src) && !utf8.ValidString(got) {
				t.Errorf("htmlText(%q, %v) = %q: not UTF-8", src, links, got)
			}
			for _, l := range strings.Split(got, "\n") {
				if l != strings.TrimSpace(l) {
					t.Errorf("htmlText(%q, %v): line %q is not trimmed", src, links, l)
				}
			}
		}
	})
}

func FuzzClean(f *testing.F) {
	for _, tc := range readMailCases {
		if _, body, ok := strings.Cut(tc.raw, "\n\n"); ok {
			f.Add(body)
			f.Add(strings.ReplaceAll(body, "\n", "\r\n"))
		}
	}
	f.Add("a\nOn Mon, Bob wrote:\n\n> q\n>\n b")
	f.Fuzz(func(t *testing.T, text string) {
		got := Clean(text)
		// Clean cuts what is not the message: what it leaves is all
		// message, and cleaning it again changes nothing.
		if again := Clean(got); again != got {
			t.Errorf("Clean(%q) = %q, and Clean of that = %q", text, got, again)
		}
		if len(got) > len(text) {
			t.Errorf("Clean(%q) = %q: longer", text, got)
		}
		if got != strings.TrimSpace(got) || strings.Contains(got, "\n\n\n") {
			t.Errorf("Clean(%q) = %q: space at an end, or blank lines left", text, got)
		}
		for _, l := range strings.Split(got, "\n") {
			if strings.TrimRight(l, " \t\r") != l || strings.HasPrefix(strings.TrimSpace(l), ">") {
				t.Errorf("Clean(%q): line %q has trailing space or is quoted", text, l)
			}
		}
	})
}

func FuzzParseAddress(f *testing.F) {
	for _, a := range []string{
		"+15551234567@sms.test", "+1-555-123-4567@SMS.Test", "+15551234567+dev-pixel7@sms.test",
		"+15551234567+dev-a+b@sms.test", "+15551234567+pool-sales@sms.test", "15551234567@sms.test",
		"+15551234567+dev-pix\x00el7@sms.test", "07400-123-456+dev-pixel7@sms.test", "0740012@sms.test",
		"+15551234567+dev-pixel\x7f@sms.test", "@sms.test", "+15551234567",
	} {
		f.Add(a, "")
		f.Add(a, "GB")
	}
	f.Fuzz(func(t *testing.T, addr, region string) {
		region, err := numplan.CheckRegion(region)
		if err != nil {
			region = "" // a company's region is checked when it is set
		}
		a, err := ParseAddressIn(addr, "sms.test", region)
		if err != nil {
			var se *smtp.SMTPError
			if !errors.As(err, &se) || se.Code != 550 {
				t.Errorf("ParseAddressIn(%q, %q): got %v, want a 550 reply", addr, region, err)
			}
			return
		}
		if n, err := phone.Normalize(a.Phone); err != nil || n != a.Phone {
			t.Errorf("ParseAddressIn(%q, %q): phone %q is not E.164", addr, region, a.Phone)
		}
		if a.Device != "" && a.Pool != "" {
			t.Errorf("ParseAddressIn(%q, %q) = %+v: a device and a pool", addr, region, a)
		}
		if !utf8.ValidString(a.Device + a.Pool) {
			t.Errorf("ParseAddressIn(%q, %q) = %+v: a name that is not UTF-8", addr, region, a)
		}
		if strings.ContainsFunc(a.Device+a.Pool, func(r rune) bool { return r < 0x20 || r >= 0x7f && r < 0xa0 }) {
			t.Errorf("ParseAddressIn(%q, %q) = %+v: a control character", addr, region, a)
		}
	})
}
