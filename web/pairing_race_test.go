package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/web"
)

// phonesBetween is the hub with a step run once, when armed, inside the
// devices state's read: after the company's devices were listed (their
// presence is asked next).
type phonesBetween struct {
	*gateway.Hub
	mu   sync.Mutex
	step func()
}

func (p *phonesBetween) Presence(devices map[string]uint64) map[string]time.Time {
	p.mu.Lock()
	step := p.step
	p.step = nil
	p.mu.Unlock()
	if step != nil {
		step()
	}
	return p.Hub.Presence(devices)
}

// pairingWhileListed is a signed-in admin with a pairing code, whose phone
// "fp-new" registers with it inside the next read of the company's devices
// (once their list is read, as their presence is asked).
func pairingWhileListed(t *testing.T) (*env, *browser, string) {
	t.Helper()
	between := &phonesBetween{}
	e := newEnv(t, func(o *envOptions) {
		o.phones = func(h *gateway.Hub) web.Phones { between.Hub = h; return between }
	})
	ada := e.acmeWithPhone()
	p := ada.post("/console/pairing", nil)
	m := pairingParam.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		t.Fatalf("pairing: %d %s", p.status, p.body)
	}
	code := m[1]
	between.mu.Lock()
	between.step = func() { e.registerPhone(code, "fp-new") }
	between.mu.Unlock()
	return e, ada, code
}

// TestPairingStateNeverSaysExpiredForTheCodesPhone: a phone that registers
// with the panel's code while the panel's poll is being answered. The
// poll listed the devices, then asked whether the code still works: a
// phone registering between the two was in neither, and the code, used,
// answered "expired", so the panel told a user whose phone had just
// paired that the code had expired. The code is asked first now: used by
// then, the phone is in the list read after it.
func TestPairingStateNeverSaysExpiredForTheCodesPhone(t *testing.T) {
	t.Parallel()
	e, ada, code := pairingWhileListed(t)
	for range 2 { // the poll the phone registers in, and the next
		req, _ := http.NewRequest(http.MethodGet, e.url+"/console/devices/state?pairing="+url.QueryEscape(code), nil)
		req.Header.Set("Accept", "application/json")
		res, err := ada.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got := read(t, res)
		var s struct {
			Pairing string
			Devices []struct{ Fingerprint string }
		}
		if got.status != http.StatusOK {
			t.Fatalf("state: %d %s", got.status, got.body)
		}
		if err := json.Unmarshal([]byte(got.body), &s); err != nil {
			t.Fatalf("%s: %v", got.body, err)
		}
		listed := false
		for _, d := range s.Devices {
			listed = listed || d.Fingerprint == "fp-new"
		}
		if s.Pairing == "expired" && !listed {
			t.Fatalf("the code's phone registered, yet the state says the code expired without it: %s", got.body)
		}
	}
}

// TestPairingPageNeverSaysExpiredForTheCodesPhone: the same on the page
// itself (/console/devices?pairing=, reloaded while the phone pairs): it
// listed the devices, then asked the code, and a phone that registered in
// between was in neither; the page said the code no longer works, without
// the phone, and its panel asked nothing more, so the phone showed only
// after another reload.
func TestPairingPageNeverSaysExpiredForTheCodesPhone(t *testing.T) {
	t.Parallel()
	_, ada, code := pairingWhileListed(t)
	for range 2 { // the page the phone registers in, and the next
		got := ada.get("/console/devices?pairing=" + url.QueryEscape(code))
		if got.status != http.StatusOK {
			t.Fatalf("page: %d %s", got.status, got.body)
		}
		if strings.Contains(got.body, `data-expired="true"`) && !strings.Contains(got.body, `id="device-fp-new"`) {
			t.Fatalf("the code's phone registered, yet the page says the code no longer works without it: %s", got.body)
		}
	}
}
