package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// apiJSON reads an API route with the company's key.
func (e *env) apiJSON(key, path string, out any) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := testhttp.Client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	p := read(e.t, res)
	if p.status != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, p.status, p.body)
	}
	if err := json.Unmarshal([]byte(p.body), out); err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
}

// textOf is the text of the element with the id, tags dropped.
func textOf(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`id="` + id + `"[^>]*>(.*?)</`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no element #%s in the page", id)
	}
	return m[1]
}

// The overview's credits and the billing page's plan count are two rules
// (docs/billing.md, "Two figures"): a scheduled send and one that failed
// with no_sim count toward the plan and use no credit; a sent SMS of two
// parts counts once toward the plan and uses two credits. Each page says
// which figure it shows, and the billing page shows both.
func TestCreditsAndPlanMessagesAreTwoNamedFigures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	ph := e.pairPhone(e.pairingCode(key), "fp-1", false)
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	send := func(to, text, at string) string {
		p := b.post("/console/messages/send", url.Values{"device_fingerprint": {"fp-1"}, "phone": {to}, "message": {text}, "sim_slot": {"SIM1"}, "send_at": {at}})
		m := queueIDOf.FindStringSubmatch(p.body)
		if p.status != http.StatusOK || m == nil {
			t.Fatalf("send to %s: %d %s", to, p.status, p.body)
		}
		return m[1]
	}
	long := send("+15550100001", strings.Repeat("a", 200), "") // two segments
	poll.Until(t, "the phone has the long SMS", func() bool { return ph.Journaled(long) })
	ph.Report(long, proto.StatusSent, "")
	noSIM := send("+15550100002", "no sim", "")
	poll.Until(t, "the phone has the second SMS", func() bool { return ph.Journaled(noSIM) })
	ph.Report(noSIM, proto.StatusFailed, "no_sim")
	send("+15550100003", "later", e.clock.Now().Add(2*time.Hour).UTC().Format("2006-01-02T15:04"))

	var dash struct {
		CreditsUsed uint64 `json:"creditsUsed"`
	}
	var sub struct {
		Usage struct {
			Messages int64 `json:"messages_this_period"`
		} `json:"usage"`
	}
	poll.Until(t, "the failed SMS is counted", func() bool {
		var stats struct {
			Totals struct{ Failed int } `json:"totals"`
		}
		e.apiJSON(key, "/analytics", &stats)
		return stats.Totals.Failed == 1
	})
	e.apiJSON(key, "/dashboard/summary", &dash)
	e.apiJSON(key, "/billing/subscription", &sub)
	if dash.CreditsUsed != 2 || sub.Usage.Messages != 3 {
		t.Fatalf("creditsUsed %d, messages_this_period %d: want 2 (the sent SMS's segments) and 3 (every accepted send)", dash.CreditsUsed, sub.Usage.Messages)
	}

	overview := b.get("/console/").body
	if !strings.Contains(overview, `<span class="num">2</span><span>credits used this period (segments sent)</span>`) {
		t.Error("the overview does not show 2 credits named as segments sent")
	}
	bill := b.get("/console/billing").body
	for _, want := range []string{"<dt>Messages accepted toward the plan</dt>", "<dt>Credits used (segments sent)</dt>"} {
		if !strings.Contains(bill, want) {
			t.Errorf("the billing page lacks %s", want)
		}
	}
	if got := textOf(t, bill, "usage-messages"); got != "3 of unlimited" {
		t.Errorf("billing's messages: got %q, want %q", got, "3 of unlimited")
	}
	if got := textOf(t, bill, "usage-credits"); got != "2" {
		t.Errorf("billing's credits: got %q, want %q", got, "2")
	}
}

// The billing page on the self-hosted default (the hidden unlimited plan):
// prices, counts and buttons read as a person would write them.
func TestBillingPageReadsAsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	bill := b.get("/console/billing").body
	for _, want := range []string{
		`<p class="num price">No charge</p>`, `<p class="num price">9.00 USD / month</p>`, `<p class="num price">49.00 USD / month</p>`,
		"100 messages a month, 1 device</p>", "2,000 messages a month, 3 devices, 14-day trial", "25,000 messages a month, 20 devices",
		">Switch to Free</button>", ">Switch to Starter</button>",
		`data-confirm="Switch from Unlimited to Free? Its limits are 100 messages a month and 1 device."`,
		`<dd id="usage-devices">0 of unlimited</dd>`,
	} {
		if !strings.Contains(bill, want) {
			t.Errorf("the billing page lacks %s", want)
		}
	}
	for _, bad := range []string{"1 devices", "0.00 usd", "Choose "} {
		if strings.Contains(bill, bad) {
			t.Errorf("the billing page says %q", bad)
		}
	}
	end := textOf(t, bill, "period-end")
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d UTC$`).MatchString(end) {
		t.Errorf("period end %q is not written as 2006-01-02 15:04 UTC", end)
	}
}

// A plans file's prices read in their currency's own unit: cents for most,
// the unit itself for the zero-decimal ones (yen), thousandths for the
// three-decimal ones (Kuwaiti dinar), as Stripe counts them. 9,000 KWD
// minor units are 9.000 KWD: the page said 90.00 KWD.
func TestBillingPagePricesInTheirCurrency(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "plans.json")
	var plans []string
	for _, p := range []struct {
		amount   int64
		currency string
	}{{2950, "usd"}, {1200, "jpy"}, {9000, "kwd"}, {1234560, "bhd"}, {50, "tnd"}} {
		plans = append(plans, fmt.Sprintf(`{"id": %q, "name": %q, "price": {"amount": %d, "currency": %q, "interval": "month"}, "limits": {"messages_per_month": null, "devices": null}}`,
			p.currency, strings.ToUpper(p.currency), p.amount, p.currency))
	}
	if err := os.WriteFile(file, []byte(`{"plans": [`+strings.Join(plans, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := billing.LoadPlans(file)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *envOptions) { o.plans = loaded })
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	bill := b.get("/console/billing").body
	for _, want := range []string{"29.50 USD / month", "1,200 JPY / month", "9.000 KWD / month", "1,234.560 BHD / month", "0.050 TND / month"} {
		if !strings.Contains(bill, `<p class="num price">`+want+`</p>`) {
			t.Errorf("the billing page lacks the price %q", want)
		}
	}
}
