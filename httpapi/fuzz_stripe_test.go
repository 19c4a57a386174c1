package httpapi_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v76/webhook"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/webhook"
)

// Ways FuzzStripeSignature writes the Stripe-Signature header.
const (
	sigAsGiven   = iota // the fuzzed header as it is
	sigSigned           // a true signature of the body, made now
	sigSignedAnd        // a true signature, the fuzzed text after it
	sigAndSigned        // the fuzzed text, a true signature after it
	sigOtherBody        // a true signature of another body
	sigWays
)

// FuzzStripeSignature posts fuzzed bodies to POST /billing/stripe/webhook
// with a fuzzed Stripe-Signature header, or one signed with the endpoint's
// secret (stripe-mock is not needed: only the server's secret signs). The
// answer is never a 5xx and always the contract's (fuzzEnv.send), a
// header that does not verify the body (as Stripe's own library judges
// it) is 400 naming Stripe-Signature, and a body that is verified is
// never refused for its signature.
func FuzzStripeSignature(f *testing.F) {
	e := newBillingEnv(f, storetest.Options{}, webhook.Config{}, billing.Config{
		Plans: stripePlans(), WebhookSecret: testWebhookSecret,
		// Never called: a webhook delivery asks nothing of Stripe.
		Provider: billing.NewStripe(billing.StripeConfig{Key: "sk_test_123", APIURL: "http://127.0.0.1:9", Timeout: time.Second}),
	}, fuzzRoomy)
	fe := &fuzzEnv{env: e}
	a := e.newCompany("Stripe Fuzz", "owner@stripe-fuzz.test")
	cid := strconv.FormatFloat(a.id, 'f', -1, 64)
	event := func(id, typ string, object map[string]any) []byte {
		b, err := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "created": 1_795_000_000,
			"api_version": "2020-08-27", "data": map[string]any{"object": object}})
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	meta := map[string]any{"company_id": cid, "plan_id": "starter"}
	bodies := [][]byte{
		event("evt_f1", "checkout.session.completed", map[string]any{"id": "cs_1", "object": "checkout.session", "customer": "cus_F", "subscription": "sub_F", "metadata": meta}),
		event("evt_f2", "customer.subscription.updated", map[string]any{"id": "sub_F", "object": "subscription", "customer": "cus_F", "status": "active", "metadata": meta}),
		event("evt_f3", "invoice.paid", map[string]any{}),
		event("evt_f4", "customer.subscription.deleted", map[string]any{"id": "sub_F", "object": "subscription", "customer": 7, "metadata": []int{1}}),
		[]byte(`{}`), []byte(``), []byte(`not json`), []byte(`{"id":"evt_x","type":"checkout.session.completed","data":{"object":"x"}}`),
	}
	for _, b := range bodies {
		for way := range sigWays {
			f.Add(b, "", uint8(way))
		}
	}
	for _, h := range []string{
		"t=1,v1=00", "t=,v1=", "v1=" + strings.Repeat("0", 64), "t=1795000000", "t=-1,v1=zz,v0=00", "t=99999999999999999999,v1=ab",
		"t=1,t=2,v1=ab,v1=cd", ",,,", "=", "t=1;v1=ab", "t=1, v1=ab", "\xff\xfe", strings.Repeat("v1=ab,", 2000), "T=1,V1=ab",
	} {
		f.Add(bodies[0], h, uint8(sigAsGiven))
		f.Add(bodies[0], h, uint8(sigSignedAnd))
		f.Add(bodies[0], h, uint8(sigAndSigned))
	}
	f.Fuzz(func(t *testing.T, body []byte, text string, way uint8) {
		now := e.clock.Now() // the server's
		h := text
		switch way % sigWays {
		case sigSigned:
			h = stripeSign(body, now)
		case sigSignedAnd:
			h = stripeSign(body, now) + text
		case sigAndSigned:
			h = text + stripeSign(body, now)
		case sigOtherBody:
			h = stripeSign(append([]byte("x"), body...), now)
		}
		req := fuzzReq{method: "POST", path: "/billing/stripe/webhook", op: "/billing/stripe/webhook", body: body, header: map[string]string{"Stripe-Signature": h}}
		status, _, raw := fe.exchange(t, req)
		if status == http.StatusRequestEntityTooLarge {
			return
		}
		// What the server sees of the header: net/http trims its ends. A
		// header that verifies names the time it was signed at, the
		// server's: within the tolerance of its clock, which the library
		// would compare with the machine's.
		verified := stripewebhook.ValidatePayloadIgnoringTolerance(body, strings.Trim(h, " \t"), testWebhookSecret) == nil
		refusedSig := status == http.StatusBadRequest && strings.Contains(string(raw), `"field":"Stripe-Signature"`)
		if verified && refusedSig || !verified && !refusedSig {
			t.Fatalf("Stripe-Signature %q (verifies: %v) on %q: got %d %s", h, verified, body, status, raw)
		}
	})
}

// stripeSign is a Stripe-Signature header for body, signed at now with
// the endpoint's secret, as Stripe writes one.
func stripeSign(body []byte, now time.Time) string {
	ts := strconv.FormatInt(now.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(testWebhookSecret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
