package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// analyticsCounts reads a {sent, delivered, failed, received, expired} object.
func analyticsCounts(v any) [5]float64 {
	m, _ := v.(map[string]any)
	var out [5]float64
	for i, k := range []string{"sent", "delivered", "failed", "received", "expired"} {
		out[i], _ = m[k].(float64)
	}
	return out
}

func (e *env) analytics(token, query string) resp {
	e.t.Helper()
	r := e.do(call{method: "GET", path: "/analytics?" + query, token: token})
	e.want(r, http.StatusOK, "")
	return r
}

func (e *env) waitStatus(key, queueID, status string) {
	e.t.Helper()
	e.eventually(queueID+" "+status, func() bool { return e.queueStatus(key, queueID).str("status") == status })
}

func TestDashboardAndAnalyticsCountWhatHappened(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	memberID, member := e.phonesInviteMember(a, "member@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	e.pairPhone(a.apiKey, "a-two") // never connects
	e.pairPhone(a.apiKey, "a-off")
	e.want(e.do(call{method: "PATCH", path: "/device/a-off", token: a.apiKey, body: map[string]any{"status": "disabled"}}), http.StatusOK, "")
	e.pairPhone(b.apiKey, "b-phone")
	const secret = "secret text 4711"

	// Day one, 2026-11-22: three sends through a-phone by the member, the API key and the admin.
	send := func(token, fp string) string {
		r := e.do(call{method: "POST", path: "/chat/send", token: token, body: sendBody(fp, "+15551234567", secret, "")})
		e.want(r, http.StatusOK, "")
		return r.str("queueId")
	}
	byMember, byKey, byAdmin := send(member, "a-phone"), send(a.apiKey, "a-phone"), send(a.access, "a-phone")
	e.eventually("three jobs", func() bool { return len(phone.Jobs()) == 3 })
	for _, id := range []string{byMember, byKey, byAdmin} {
		e.waitStatus(a.apiKey, id, "sending")
	}
	// Sent, then sent again and delivered twice (at-least-once reports): counted once each.
	phone.Report(byMember, proto.StatusSent, "")
	e.waitStatus(a.apiKey, byMember, "sent")
	phone.Report(byMember, proto.StatusSent, "")
	phone.Report(byMember, proto.StatusDelivered, "")
	phone.Report(byMember, proto.StatusDelivered, "")
	// Straight from sending to delivered: sent and delivered once each.
	phone.Report(byKey, proto.StatusDelivered, "")
	phone.Report(byAdmin, proto.StatusFailed, "no_service")
	e.waitStatus(a.apiKey, byMember, "delivered")
	e.waitStatus(a.apiKey, byKey, "delivered")
	e.waitStatus(a.apiKey, byAdmin, "failed")
	phone.Report(byAdmin, proto.StatusFailed, "no_service") // a repeat once more, after the fact
	if ack := <-phone.Receive(proto.Inbound{ClientID: "in-1", From: "+15557654321", Message: secret, SIMSlot: "SIM1"}); ack.ID == 0 {
		t.Fatalf("inbound ack %+v", ack)
	}
	<-phone.Receive(proto.Inbound{ClientID: "in-1", From: "+15557654321", Message: secret, SIMSlot: "SIM1"}) // a duplicate

	// Two days later a send to a phone that never connects expires on the third.
	e.clock.Advance(48 * time.Hour)
	late := send(a.apiKey, "a-two")
	e.clock.Advance(24*time.Hour + time.Second)
	e.sms.Expire()
	e.waitStatus(a.apiKey, late, "expired")
	<-phone.Receive(proto.Inbound{ClientID: "in-2", From: "+15557654321", Message: "again", SIMSlot: "SIM1"})
	// Deleting a-two fails what it still had queued.
	gone := send(a.apiKey, "a-two")
	e.want(e.do(call{method: "DELETE", path: "/device/delete/a-two", token: a.apiKey}), http.StatusOK, "")
	e.waitStatus(a.apiKey, gone, "failed")

	// The dashboard, read by a member (signed in again: days went by).
	member, _ = e.login("member@acme.test", goodPassword)
	r := e.do(call{method: "GET", path: "/dashboard/summary", token: member})
	e.want(r, http.StatusOK, "")
	if r.Body["totalMessagesSent"] != 2.0 || r.Body["activeDevices"] != 1.0 || r.Body["creditsUsed"] != 2.0 {
		t.Errorf("summary: got %s, want totalMessagesSent 2, activeDevices 1 (a-off is disabled, a-two deleted), creditsUsed 2", r.Raw)
	}
	recent, _ := r.Body["recentActivity"].([]any)
	if len(recent) != 10 {
		t.Fatalf("recentActivity has %d items, want 10: %s", len(recent), r.Raw)
	}
	first := recent[0].(map[string]any)
	if first["type"] != "device.deleted" || first["at"] != "2026-11-25T10:00:01.000Z" {
		t.Errorf("newest event %v, want device.deleted at 2026-11-25T10:00:01.000Z", first)
	}
	types := map[any]bool{}
	for _, it := range recent {
		ev := it.(map[string]any)
		types[ev["type"]] = true
		if d, _ := ev["description"].(string); d == "" || strings.Contains(d, "secret") || strings.Contains(d, "1234567") {
			t.Errorf("event description %q: want one without message text or the whole number", d)
		}
	}
	for _, want := range []string{"message.expired", "message.received", "message.failed", "message.delivered"} {
		if !types[want] {
			t.Errorf("recentActivity lacks %s: %s", want, r.Raw)
		}
	}

	// Totals and a series with its empty days.
	r = e.analytics(member, "from=2026-11-20&to=2026-11-25")
	if got, want := analyticsCounts(r.Body["totals"]), [5]float64{2, 2, 2, 2, 1}; got != want {
		t.Errorf("totals [sent delivered failed received expired]: got %v, want %v", got, want)
	}
	series, _ := r.Body["series"].([]any)
	wantDays := map[string][5]float64{"2026-11-20": {}, "2026-11-21": {}, "2026-11-22": {2, 2, 1, 1, 0}, "2026-11-23": {}, "2026-11-24": {}, "2026-11-25": {0, 0, 1, 1, 1}}
	if len(series) != len(wantDays) {
		t.Fatalf("series has %d items, want %d: %s", len(series), len(wantDays), r.Raw)
	}
	for i, it := range series {
		day := it.(map[string]any)
		date := fmt.Sprint(day["date"])
		if want := time.Date(2026, 11, 20+i, 0, 0, 0, 0, time.UTC).Format("2006-01-02"); date != want {
			t.Errorf("series[%d].date %s, want %s", i, date, want)
		}
		if got := analyticsCounts(day); got != wantDays[date] {
			t.Errorf("series %s: got %v, want %v", date, got, wantDays[date])
		}
	}
	devs := map[string][5]float64{}
	for _, it := range r.Body["byDevice"].([]any) {
		d := it.(map[string]any)
		devs[fmt.Sprint(d["device_fingerprint"])] = analyticsCounts(d)
	}
	if devs["a-phone"] != [5]float64{2, 2, 1, 2, 0} || devs["a-two"] != [5]float64{0, 0, 1, 0, 1} || len(devs) != 2 {
		t.Errorf("byDevice: got %v, want a-phone and the deleted a-two with their counts", devs)
	}
	// A device the filter names is listed even with nothing counted.
	r2 := e.analytics(member, "from=2026-11-20&to=2026-11-25&devices=a-off,b-phone")
	if bd := r2.Body["byDevice"].([]any); len(bd) != 1 || bd[0].(map[string]any)["device_fingerprint"] != "a-off" || bd[0].(map[string]any)["device_name"] != "Phone a-off" {
		t.Errorf("byDevice with devices=a-off,b-phone: %s, want a-off at zero and nothing of company B", r2.Raw)
	}

	// Filters: the member's sends; the first admin's, the API key's included; a device.
	filters := []struct {
		query string
		want  [5]float64
	}{
		{fmt.Sprintf("users=%d", int(memberID)), [5]float64{1, 1, 0, 0, 0}},
		{fmt.Sprintf("users=%d", int(a.adminID)), [5]float64{1, 1, 2, 0, 1}},
		{fmt.Sprintf("users=%d,%d", int(a.adminID), int(memberID)), [5]float64{2, 2, 2, 0, 1}},
		{"devices=a-phone", [5]float64{2, 2, 1, 2, 0}},
		{"devices=a-two", [5]float64{0, 0, 1, 0, 1}},
		{fmt.Sprintf("devices=a-phone&users=%d", int(memberID)), [5]float64{1, 1, 0, 0, 0}},
		// Another company's ids and unknown ones match nothing.
		{"devices=b-phone", [5]float64{}},
		{"devices=nope", [5]float64{}},
		{fmt.Sprintf("users=%d", int(b.adminID)), [5]float64{}},
		{"users=999999", [5]float64{}},
		// Past the largest id (read as it), and the largest itself: the
		// counters of inbound messages are kept under that id, and were
		// answered.
		{"users=99999999999999999999", [5]float64{}},
		{"users=18446744073709551615", [5]float64{}},
	}
	for _, f := range filters {
		r := e.analytics(a.apiKey, "from=2026-11-20&to=2026-11-25&"+f.query)
		if got := analyticsCounts(r.Body["totals"]); got != f.want {
			t.Errorf("%s: got %v, want %v", f.query, got, f.want)
		}
	}
	// Company B sees none of A's counts, whatever it asks for.
	for _, q := range []string{"", "devices=a-phone", fmt.Sprintf("users=%d", int(a.adminID))} {
		r := e.analytics(b.apiKey, "from=2026-11-20&to=2026-11-25&"+q)
		if got := analyticsCounts(r.Body["totals"]); got != [5]float64{} {
			t.Errorf("company B, %q: got %v, want zeros", q, got)
		}
	}
	if r := e.do(call{method: "GET", path: "/dashboard/summary", token: b.apiKey}); r.Body["totalMessagesSent"] != 0.0 || len(r.Body["recentActivity"].([]any)) != 1 {
		t.Errorf("company B's summary: %s, want nothing sent and only its device.paired", r.Raw)
	}

	// The default range is the last 30 days, today included.
	r = e.analytics(member, "")
	if s := r.Body["series"].([]any); len(s) != 30 || s[29].(map[string]any)["date"] != "2026-11-25" || r.Body["from"] != "2026-10-27" {
		t.Errorf("default range: %d items, from %v, last %v", len(s), r.Body["from"], s[len(s)-1])
	}
	if s := e.analytics(member, "from=2025-11-25&to=2026-11-25").Body["series"].([]any); len(s) != 366 {
		t.Errorf("366 days: got %d items", len(s))
	}

	// The filter list: fingerprints, the deleted one with counts included, no other company's.
	r = e.do(call{method: "GET", path: "/analytics/devices", token: member})
	e.want(r, http.StatusOK, "")
	var ids []string
	for _, it := range r.Body["devices"].([]any) {
		d := it.(map[string]any)
		ids = append(ids, fmt.Sprint(d["id"]))
		if d["name"] == "" {
			t.Errorf("device %v without a name", d)
		}
	}
	if strings.Join(ids, ",") != "a-off,a-phone,a-two" {
		t.Errorf("analytics devices: got %v, want a-off, a-phone, a-two", ids)
	}
}

func TestAnalyticsRefusesBadRanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	// Account events reach the activity list too, newest first.
	_, member := e.phonesInviteMember(a, "member@acme.test")
	e.want(e.do(call{method: "POST", path: "/account/api-key/rotate", token: a.access}), http.StatusOK, "")
	r := e.do(call{method: "GET", path: "/dashboard/summary", token: member})
	e.want(r, http.StatusOK, "")
	var types []string
	for _, it := range r.Body["recentActivity"].([]any) {
		types = append(types, fmt.Sprint(it.(map[string]any)["type"]))
	}
	if strings.Join(types, ",") != "api_key.rotated,user.invited" {
		t.Errorf("recentActivity types %v, want api_key.rotated, user.invited", types)
	}
	cases := []struct{ query, field string }{
		{"from=2026-13-01", "from"},
		{"from=22.11.2026", "from"},
		{"to=2026-11-31", "to"},
		{"from=2026-11-22&to=2026-11-21", "from"},
		{"from=2025-11-21&to=2026-11-22", "from"},
		{"from=2024-01-01", "from"}, // up to today: too long
		{"users=abc", "users"},
		{"users=0", "users"},
		{"users=1,,2", "users"},
		{"devices=a,,b", "devices"},
	}
	for _, c := range cases {
		r := e.do(call{method: "GET", path: "/analytics?" + c.query, token: a.access})
		if r.Status != http.StatusBadRequest || r.str("error") != "validation_failed" || r.str("field") != c.field {
			t.Errorf("%s: got %d %s, want 400 validation_failed field %s", c.query, r.Status, r.Raw, c.field)
		}
	}
}

// TestAnalyticsByDeviceMergesRegistrations: byDevice lists fingerprints in
// order, whatever order they were paired in, and sums every registration of
// one fingerprint (a phone deleted and paired again), under the live one's
// name when the live one is listed; a deleted device with nothing in the
// range is left out.
func TestAnalyticsByDeviceMergesRegistrations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	// A message queued on a phone that never connects fails when the phone is
	// deleted: one failed count for that registration.
	failOn := func(fp string, n int) {
		t.Helper()
		for range n {
			e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody(fp, "+15551234567", "hi", "")}), http.StatusOK, "")
		}
		e.want(e.do(call{method: "DELETE", path: "/device/delete/" + fp, token: a.apiKey}), http.StatusOK, "")
	}
	e.pairPhone(a.apiKey, "m-phone")
	failOn("m-phone", 1)
	e.pairPhone(a.apiKey, "m-phone")
	failOn("m-phone", 2)
	e.pairPhone(a.apiKey, "m-phone")
	e.want(e.do(call{method: "PATCH", path: "/device/m-phone", token: a.apiKey, body: map[string]any{"device_name": "Front desk"}}), http.StatusOK, "")
	e.pairPhone(a.apiKey, "b-phone")
	failOn("b-phone", 1)
	e.pairPhone(a.apiKey, "idle-gone")
	e.want(e.do(call{method: "DELETE", path: "/device/delete/idle-gone", token: a.apiKey}), http.StatusOK, "")

	type item struct {
		fp, name string
		counts   [5]float64
	}
	byDevice := func(query string) []item {
		t.Helper()
		var out []item
		for _, it := range e.analytics(a.apiKey, query).Body["byDevice"].([]any) {
			d := it.(map[string]any)
			out = append(out, item{fmt.Sprint(d["device_fingerprint"]), fmt.Sprint(d["device_name"]), analyticsCounts(d)})
		}
		return out
	}
	got := byDevice("")
	if len(got) != 2 || got[0].fp != "b-phone" || got[0].counts != [5]float64{0, 0, 1, 0, 0} || got[1].fp != "m-phone" || got[1].counts != [5]float64{0, 0, 3, 0, 0} {
		t.Errorf("byDevice: got %v, want b-phone with 1 failed, then m-phone's three registrations with 3", got)
	}
	// Named by the filter, the live registration is listed too, and names the item.
	want := []item{{"b-phone", "Phone b-phone", [5]float64{0, 0, 1, 0, 0}}, {"m-phone", "Front desk", [5]float64{0, 0, 3, 0, 0}}}
	if got := byDevice("devices=m-phone,b-phone,idle-gone"); !slices.Equal(got, want) {
		t.Errorf("byDevice with devices=m-phone,b-phone,idle-gone: got %v, want %v", got, want)
	}
}
