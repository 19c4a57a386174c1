package mail

import (
	"html"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/mail/mailtest"
)

func TestTemplates(t *testing.T) {
	t.Parallel()
	// A token with every character that needs escaping in a query.
	const token = "a b+c/d=e&f?g#h%i"
	const escaped = "a+b%2Bc%2Fd%3De%26f%3Fg%23h%25i"
	tests := []struct {
		name        string
		msg         Message
		wantSubject string
		wantLink    string // in the text body, and as an href in the HTML body
		wantPhrases []string
	}{
		{
			name:        "verify",
			msg:         VerifyEmail("https://sms.example.com/", "Ana", "Acme", token, 24*time.Hour),
			wantSubject: "Verify your e-mail address for simrelay",
			wantLink:    "https://sms.example.com/verify-email?token=" + escaped,
			wantPhrases: []string{"Hi Ana,", "Acme", "expires in 24 hours"},
		},
		{
			name:        "reset",
			msg:         ResetPassword("https://sms.example.com", "Ana", token, time.Hour),
			wantSubject: "Reset your simrelay password",
			wantLink:    "https://sms.example.com/reset-password?token=" + escaped,
			wantPhrases: []string{"Hi Ana,", "expires in 1 hour"},
		},
		{
			name:        "invite",
			msg:         Invite("http://127.0.0.1:8080", "Bo", "Acme", "Ana Admin", token, 7*24*time.Hour),
			wantSubject: "Ana Admin invited you to Acme on simrelay",
			wantLink:    "http://127.0.0.1:8080/reset-password?token=" + escaped,
			wantPhrases: []string{"Hi Bo,", "Set your password", "expires in 7 days"},
		},
		{
			name:        "invite without names",
			msg:         Invite("http://127.0.0.1:8080", "", "", "", token, 48*time.Hour),
			wantSubject: "You are invited to simrelay",
			wantLink:    "http://127.0.0.1:8080/reset-password?token=" + escaped,
			wantPhrases: []string{"Hi,", "expires in 2 days"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.msg
			if m.Subject != tt.wantSubject {
				t.Errorf("subject: got %q, want %q", m.Subject, tt.wantSubject)
			}
			if m.To != "" {
				t.Errorf("To: got %q, want it empty for the caller to fill", m.To)
			}
			if !strings.Contains(m.Text, tt.wantLink) {
				t.Errorf("text body: got %q, want it to contain %q", m.Text, tt.wantLink)
			}
			// html/template writes some URL characters as entities (+ is &#43;);
			// a browser undoes them before following the link.
			if want := `href="` + tt.wantLink + `"`; !strings.Contains(html.UnescapeString(m.HTML), want) {
				t.Errorf("HTML body: got %q, want it to contain %q", m.HTML, want)
			}
			for _, body := range []string{m.Text, m.HTML} {
				path := tt.wantLink[strings.LastIndex(tt.wantLink, "/"):strings.Index(tt.wantLink, "?")]
				if got := mailtest.LinkToken(body, path); got != token {
					t.Errorf("LinkToken(body, %q): got %q, want %q", path, got, token)
				}
				for _, p := range tt.wantPhrases {
					if !strings.Contains(body, p) {
						t.Errorf("body %q: want it to contain %q", body, p)
					}
				}
				if !strings.Contains(body, "simrelay") {
					t.Errorf("body %q: want it to name simrelay", body)
				}
			}
		})
	}
}

func TestTemplatesTameNames(t *testing.T) {
	t.Parallel()
	m := Invite("https://sms.example.com", "Bo", "<b>Acme</b>\r\nBcc: x@evil.example", "Ana <script>alert(1)</script>", "tok", time.Hour)
	if strings.ContainsAny(m.Subject, "\r\n") {
		t.Errorf("subject: got %q, want a single line", m.Subject)
	}
	for _, bad := range []string{"<b>", "<script>"} {
		if strings.Contains(m.HTML, bad) {
			t.Errorf("HTML body contains %q unescaped", bad)
		}
	}
	if want := "&lt;script&gt;"; !strings.Contains(m.HTML, want) {
		t.Errorf("HTML body: want the inviter's name escaped as %q", want)
	}
	long := VerifyEmail("https://sms.example.com", strings.Repeat("x", 500), "Acme", "tok", 24*time.Hour)
	if strings.Contains(long.Text, strings.Repeat("x", maxNameLen+1)) {
		t.Errorf("text body: got a name longer than %d characters", maxNameLen)
	}
}

// TestTemplatesKeepNamesDirection: a device name that ends in a
// right-to-left override must not turn "is offline" around in the subject or
// the body, and a right-to-left name is isolated from the words beside it.
func TestTemplatesKeepNamesDirection(t *testing.T) {
	t.Parallel()
	seen := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	m := DeviceOffline("https://sms.example.com/console/devices", "Ana", "Evil\u202e", "fp-1", seen, time.Hour)
	if want := "Phone Evil is offline"; m.Subject != want {
		t.Errorf("subject: got %q, want %q", m.Subject, want)
	}
	for part, body := range map[string]string{"text": m.Text, "HTML": m.HTML} {
		if strings.ContainsRune(body, '\u202e') {
			t.Errorf("%s body keeps the override: %q", part, body)
		}
	}
	rtl := DeviceOffline("https://sms.example.com/console/devices", "Ana", "هاتف 2", "fp-1", seen, time.Hour)
	if want := "Phone \u2068هاتف 2\u2069 is offline"; rtl.Subject != want {
		t.Errorf("subject: got %q, want %q", rtl.Subject, want)
	}
	inv := Invite("https://sms.example.com", "Bo", "\u2067Acme", "Ana\u202b", "tok", time.Hour)
	if want := "Ana invited you to Acme on simrelay"; inv.Subject != want {
		t.Errorf("invitation subject: got %q, want %q", inv.Subject, want)
	}
}

// A mail says a lifetime or a grace as problem.InWords says a duration, one
// wording for the server's messages: the documented ones as before (24
// hours, 1 hour, 7 days), the others in two units, rounded up.
func TestTemplatesSayDurationsInWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		msg  Message
		want string
	}{
		{ResetPassword("https://sms.example.com", "Ana", "tok", 90*time.Minute), "expires in 1 hour 30 minutes"},
		{VerifyEmail("https://sms.example.com", "Ana", "Acme", "tok", 49*time.Hour), "expires in 49 hours"},
		{DeviceOffline("https://sms.example.com/console/devices", "Ana", "Pixel", "fp-1", time.Time{}, 5*time.Minute+30*time.Second), "has not come back within 5 minutes 30 seconds"},
	} {
		if !strings.Contains(c.msg.Text, c.want) {
			t.Errorf("%q: text does not say %q:\n%s", c.msg.Subject, c.want, c.msg.Text)
		}
	}
}
