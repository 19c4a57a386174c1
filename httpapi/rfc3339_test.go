package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// RFC 3339 (section 5.6) allows a lower-case "t" between date and time and
// a lower-case "z" for UTC: send_at and expires_at take them as the
// upper-case ones, and still refuse what is no RFC 3339 time.
func TestTimesTakeRFC3339LowerCase(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	at := e.clock.Now().Add(time.Hour).UTC().Truncate(time.Second)
	upper := at.Format("2006-01-02T15:04:05Z")
	lower := strings.ToLower(upper)
	offset := at.In(time.FixedZone("", 2*3600)).Format("2006-01-02t15:04:05.000-07:00")
	for _, c := range []struct {
		name, sendAt, expiresAt string
		ok                      bool
	}{
		{"upper case", upper, "", true},
		{"lower t", strings.Replace(upper, "T", "t", 1), "", true},
		{"lower z", strings.Replace(upper, "Z", "z", 1), "", true},
		{"both lower", lower, "", true},
		{"lower t with an offset", offset, "", true},
		{"expires_at in lower case", "", lower, true},
		{"a space for the t", strings.Replace(upper, "T", " ", 1), "", false},
		{"another letter for the t", strings.Replace(upper, "T", "x", 1), "", false},
		{"two z", upper + "z", "", false},
		{"a lone z", "z", "", false},
		{"expires_at not a time", "", "tomorrowz", false},
	} {
		body := sendBody("a-phone", "+15551234567", c.name, "")
		field := "send_at"
		if c.sendAt != "" {
			body["send_at"] = c.sendAt
		} else {
			field = "expires_at"
			body["expires_at"] = c.expiresAt
		}
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: body})
		switch {
		case c.ok && r.Status != http.StatusOK:
			t.Errorf("%s (%s %q): got %d %s, want it taken", c.name, field, c.sendAt+c.expiresAt, r.Status, r.Raw)
		case !c.ok && (r.Status != http.StatusBadRequest || r.str("field") != field):
			t.Errorf("%s (%s %q): got %d %s, want 400 naming %s", c.name, field, c.sendAt+c.expiresAt, r.Status, r.Raw, field)
		}
	}
}
