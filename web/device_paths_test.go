package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestDeviceNamedPairKeepsItsForm: a phone may register the fingerprint
// "pair", and its own form (POST /console/devices/pair) renames and
// disables it like any other device's. Pairing used to live at that very
// path, so the device's form made a pairing code and changed nothing.
// Pairing is POST /console/pairing.
func TestDeviceNamedPairKeepsItsForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "pair", false)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	if p := b.get("/console/devices"); !strings.Contains(p.body, `action="/console/devices/pair"`) {
		t.Fatalf("the devices page lacks the device's form: %s", p.body)
	}
	p := b.post("/console/devices/pair", url.Values{"device_name": {"Front desk"}, "selected_sim": {"BOTH"}, "status": {"active"}})
	if p.status != http.StatusOK || strings.Contains(p.body, "pairing=") {
		t.Fatalf("the device's form: got %d %s, want the device saved", p.status, p.body)
	}
	if got := b.get("/console/devices"); !strings.Contains(got.body, "Front desk") {
		t.Errorf("the device named pair was not renamed")
	}
	if p := b.get("/console/devices"); !strings.Contains(p.body, `action="/console/pairing"`) {
		t.Errorf("the devices page's pairing button does not post to /console/pairing: %s", p.body)
	}
	if p := b.post("/console/pairing", nil); p.status != http.StatusOK || !strings.Contains(p.body, "pairing=") {
		t.Errorf("pair a phone: got %d %s, want a pairing code", p.status, p.body)
	}
}
