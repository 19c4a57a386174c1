package httpapi_test

import (
	"fmt"
	"math"
	"net/http"
	"testing"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/webhook"
)

// What a list costs must not grow with its rows: a company of 2,000 phones
// is one page of /device/list.

// GET /device/list sends PostgreSQL as many statements for 12 devices as for
// 2: their queue depths and last failures are one store read for the page.
// Read device by device, each device added two transactions (six statements
// with their BEGIN and COMMIT).
func TestDeviceListStatementsDoNotGrowWithDevices(t *testing.T) {
	t.Parallel()
	if !storetest.Postgres() {
		t.Skip("counts PostgreSQL's statements: the PostgreSQL pass of make test runs it")
	}
	stmts := &storetest.Statements{}
	e := newStoreEnv(t, storetest.Options{Statements: stmts}, webhook.Config{}, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	pair := func(from, to int) {
		for i := from; i < to; i++ {
			e.pairPhone(a.apiKey, fmt.Sprintf("cost-phone-%d", i))
		}
	}
	// cost is the fewest statements of a few lists: the server's own work
	// (webhooks, mail, expiry) may send some meanwhile, which only adds.
	cost := func(devices int) int64 {
		best := int64(math.MaxInt64)
		for range 5 {
			before := stmts.Count()
			if got := len(e.phonesList(a.apiKey)); got != devices {
				t.Fatalf("/device/list: %d devices, want %d", got, devices)
			}
			best = min(best, stmts.Count()-before)
		}
		return best
	}
	pair(0, 2)
	// Something to read: an SMS waiting for the first phone.
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("cost-phone-0", "+15557654321", "waiting", "SIM1")}), http.StatusOK, "")
	few := cost(2)
	pair(2, 12)
	many := cost(12)
	if many != few {
		t.Fatalf("/device/list: %d statements for 12 devices, %d for 2; want the same", many, few)
	}
	t.Logf("/device/list: %d statements, for 2 devices as for 12", many)
}

// The number and handle lists ask the hub once which agents are online, as
// the device list does: on a cluster each question is a query to the
// database for the links on other nodes, so asking per number made a list of
// N numbers N queries.
func TestNumberListsAskPresenceOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-on"), "agent-on", []string{"+15550001111", "+15550001112", "+15550001113"}, []string{"ana@example.com", "bo@example.com"}, false)
	off := e.runAgent(e.pairPhone(a.apiKey, "agent-off"), "agent-off", []string{"+15550001114"}, nil, false)
	off.halt()
	e.eventually("the hub sees agent-off gone", func() bool { return !linked(e.hub, "agent-off") })

	for _, ch := range []string{"whatsapp", "imessage"} {
		before := e.phones.presence.Load()
		list := e.numbers(a.apiKey, ch)
		if asked := e.phones.presence.Load() - before; asked != 1 {
			t.Errorf("%s list of %d: asked the hub %d times, want once", ch, len(list), asked)
		}
		for _, n := range list {
			if want := n["device_fingerprint"] == "agent-on"; n["online"] != want {
				t.Errorf("%s list: %v online %v, want %t", ch, n["device_fingerprint"], n["online"], want)
			}
		}
		if want := map[string]int{"whatsapp": 4, "imessage": 2}[ch]; len(list) != want {
			t.Errorf("%s list: %d, want %d", ch, len(list), want)
		}
	}
}
