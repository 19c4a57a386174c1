package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// TestHistoryHugePage: a page number near the largest integer is past the
// end, however (page-1)*limit would wrap round: an empty page with the
// conversation's total and page count.
func TestHistoryHugePage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	for i := range 3 {
		e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551230000", fmt.Sprint("n", i), "")}), http.StatusOK, "")
	}
	for _, c := range []struct {
		page, limit  string
		items, pages int
	}{
		{"9223372036854775807", "50", 0, 1}, // (page-1)*50 wraps to a small number
		{"9223372036854775807", "1", 0, 3},  // past the end without a wrap
		{"4611686018427387905", "2", 0, 2},  // (page-1)*2 = 2^63 wraps negative
		{"184467440737095517", "100", 0, 1}, // (page-1)*100 wraps to -16
		{"1844674407370955162", "10", 0, 1}, // (page-1)*10 wraps to 4
		{"3", "1", 1, 3},                    // the last page still works
		{"2", "2", 1, 2},                    // and a partial one
	} {
		q := "page=" + c.page + "&limit=" + c.limit
		r := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000&" + q, token: a.apiKey})
		e.want(r, http.StatusOK, "")
		items := r.Body["messages"].([]any)
		if len(items) != c.items || r.Body["total"] != float64(3) || r.Body["pages"] != float64(c.pages) || !strings.Contains(string(r.Raw), `"page":`+c.page) {
			t.Errorf("%s: got %d items, %s; want %d items, total 3, pages %d, page %s", q, len(items), r.Raw, c.items, c.pages, c.page)
		}
	}
	// A page number beyond any integer is refused, not wrapped.
	r := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551230000&page=99999999999999999999", token: a.apiKey})
	if r.Status != http.StatusBadRequest || r.str("field") != "page" {
		t.Errorf("page beyond int64: got %d %s, want 400 field page", r.Status, r.Raw)
	}
}

// TestHistoryQueryPhone: phone in the query follows the rule of every phone
// input. An unencoded + arrives as a space and is read as +; a number
// without its + is 400, never an empty 200; a sender that cannot be a
// number (a name, a short code) is matched as written, and so is any
// value a conversation exists under (a national number the phone gave).
func TestHistoryQueryPhone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.runPhone(e.pairPhone(a.apiKey, "a-phone"), "BOTH", false)
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("a-phone", "+15551230000", "hello", "")}), http.StatusOK, "")
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "bank-1", From: "BANK", Message: "code 1234"}))
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "short-1", From: "72345", Message: "reply STOP"}))
	waitAck(t, phone.Receive(proto.Inbound{ClientID: "national-1", From: "07911123456", Message: "see you"}))

	history := func(rawPhone string) resp {
		t.Helper()
		return e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=" + rawPhone, token: a.apiKey})
	}
	for _, raw := range []string{
		"%2B15551230000",        // encoded, as it should be
		"+15551230000",          // unencoded: arrives as " 15551230000"
		"%2015551230000",        // an encoded space in its place, the same thing
		"+1%20(555)%20123-0000", // unencoded, with the separators a body may carry
	} {
		r := history(raw)
		if r.Status != http.StatusOK || r.Body["total"] != float64(1) {
			t.Errorf("phone=%s: got %d %s, want the one message", raw, r.Status, r.Raw)
		}
	}
	for _, raw := range []string{"15551230000", "1-555-123-0000", "%2B1555", "+1555abc0000", ""} {
		r := history(raw)
		if r.Status != http.StatusBadRequest || r.str("error") != "validation_failed" || r.str("field") != "phone" {
			t.Errorf("phone=%q: got %d %s, want 400 validation_failed field phone", raw, r.Status, r.Raw)
		}
	}
	// A sender stored as the phone gave it (here a national number) is found
	// as written; the same digits with no such conversation are the 400 above.
	for raw, text := range map[string]string{"BANK": "code 1234", "72345": "reply STOP", "07911123456": "see you"} {
		r := history(raw)
		if r.Status != http.StatusOK || r.Body["total"] != float64(1) || r.Body["messages"].([]any)[0].(map[string]any)["message"] != text {
			t.Errorf("sender %s: got %d %s, want its message", raw, r.Status, r.Raw)
		}
	}
}
