package web_test

import (
	"strings"
	"testing"
)

// TestErrorPageSaysItsMessageOnce: the error page says its message once,
// as its content; the banner above said it again, word for word.
func TestErrorPageSaysItsMessageOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ada := e.acmeWithPhone()
	for who, b := range map[string]*browser{"signed in": ada, "signed out": e.browser()} {
		p := b.get("/console/no-such-page")
		if !p.errorPage(404, "There is no such page.") {
			t.Errorf("%s: %d %.300s, want the 404 page", who, p.status, p.body)
			continue
		}
		if n := strings.Count(p.body, "There is no such page."); n != 1 {
			t.Errorf("%s: the message shows %d times, want once", who, n)
		}
	}
}
