package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// Webhook scopes read numbers in the company's region as sends and the
// agents' numbers do: wa_numbers and im_handles written national (or, for
// WhatsApp, with the + dropped) are answered and kept in E.164, and take
// the messages of the numbers they name; a national number is refused
// naming the field while the company has no region.
func TestCompanyRegionWebhookNumberScopes(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	r := e.do(call{method: "PUT", path: "/webhooks/inbound-sms", token: a.apiKey, body: map[string]any{"webhooks": []map[string]any{
		{"url": rc.URL + "/wa", "wa_numbers": []string{"07400 654321"}}}}})
	e.want(r, http.StatusBadRequest, "validation_failed")
	if r.str("field") != "webhooks[0].wa_numbers[0]" {
		t.Fatalf("a national number without a region: %s", r.Raw)
	}
	e.want(e.do(call{method: "PATCH", path: "/company", token: a.apiKey, body: map[string]any{"region": "GB"}}), http.StatusOK, "")
	ag := e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{"07400 654321", "07400 123456"}, []string{"020 7946 0958"}, false)
	e.numberID(a.apiKey, "whatsapp", "+447400654321")
	e.numberID(a.apiKey, "imessage", "+442079460958")
	got := e.whPut(a.apiKey,
		map[string]any{"url": rc.URL + "/wa", "wa_numbers": []string{"07400 654321"}},
		map[string]any{"url": rc.URL + "/wa-plus-dropped", "wa_numbers": []string{"447400654321"}},
		map[string]any{"url": rc.URL + "/wa-other", "wa_numbers": []string{"07400 123456"}},
		map[string]any{"url": rc.URL + "/im", "channels": []string{"imessage"}, "im_handles": []string{"(020) 7946 0958"}},
	)
	for i, want := range []string{"[+447400654321]", "[+447400654321]", "[+447400123456]"} {
		if fmt.Sprint(got[i]["wa_numbers"]) != want {
			t.Fatalf("entry %d answered wa_numbers %v, want %s", i, got[i]["wa_numbers"], want)
		}
	}
	if fmt.Sprint(got[3]["im_handles"]) != "[+442079460958]" {
		t.Fatalf("im_handles answered %v, want [+442079460958]", got[3]["im_handles"])
	}
	w := waitAck(t, ag.Receive(proto.Inbound{ClientID: "wa-gb", Channel: "whatsapp", From: "07700 900123", To: "07400 654321", Message: "hi"}))
	i := waitAck(t, ag.Receive(proto.Inbound{ClientID: "im-gb", Channel: "imessage", From: "bob@example.com", To: "020 7946 0958", Message: "hi"}))
	// /wa-other takes the iMessage message (wa_numbers narrows WhatsApp only).
	want := map[string][]uint64{"/wa": {w.ID, i.ID}, "/wa-plus-dropped": {w.ID, i.ID}, "/wa-other": {i.ID}, "/im": {i.ID}}
	e.eventually("every matching delivery arrives", func() bool { return len(rc.Requests()) == 6 })
	deliveries := map[string][]uint64{}
	for _, r := range rc.Requests() {
		var body struct {
			Data struct {
				ID uint64 `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		deliveries[r.Path] = append(deliveries[r.Path], body.Data.ID)
	}
	for p := range deliveries {
		sort.Slice(deliveries[p], func(x, y int) bool { return deliveries[p][x] < deliveries[p][y] })
	}
	if fmt.Sprint(deliveries) != fmt.Sprint(want) {
		t.Fatalf("got deliveries %v, want %v", deliveries, want)
	}
}
