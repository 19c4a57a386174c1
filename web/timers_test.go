package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPagesTellTheScriptItsTimers: every page passes the console script
// its timers (web.Config.Timers) in milliseconds, the product's defaults
// when none are set: the pairing panel's poll every 1.5 s, its wait of at
// most 10 s for a registered phone's link, and a broken live view's 6 s
// before it says the server could not be reached.
func TestPagesTellTheScriptItsTimers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name             string
		poll, link, lost time.Duration
		want             string
	}{
		{"defaults", 0, 0, 0, `data-pairing-poll="1500" data-pairing-link="10000" data-live-lost="6000"`},
		{"set", 250 * time.Millisecond, 2 * time.Second, time.Second, `data-pairing-poll="250" data-pairing-link="2000" data-live-lost="1000"`},
	} {
		e := newEnv(t, func(o *envOptions) {
			o.timers.PairingPoll, o.timers.PairingLink, o.timers.LiveLost = c.poll, c.link, c.lost
		})
		b := e.acmeWithPhone()
		for _, path := range []string{"/console/signin", "/console/devices", "/console/messages?device=fp-1&phone=%2B15550100000"} {
			p := e.browser().get(path)
			if path != "/console/signin" {
				p = b.get(path)
			}
			if p.status != http.StatusOK || !strings.Contains(p.body, c.want) {
				t.Errorf("%s: GET %s: got %d without %s", c.name, path, p.status, c.want)
			}
		}
	}
}
