package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestInvisibleTextIsRefused: a message, or a name a person chooses, made of
// nothing visible (spaces, a zero-width space, a byte order mark, line
// breaks) is refused 400 naming the field on every route that takes one, as
// an absent one is; a text with something visible beside such characters
// is accepted and stored exactly as written.
func TestInvisibleTextIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, nil, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	for _, blank := range []string{" ", "\u200b", "\t\n", "\u200b \ufeff"} {
		text, _ := json.Marshal(blank)
		s := string(text)
		for _, c := range []struct {
			method, path, token, body, field string
		}{
			{"POST", "/chat/send", a.apiKey, `{"device_fingerprint":"a-phone","phone":"+15551234567","message":` + s + `}`, "message"},
			{"POST", "/chat/send", a.apiKey, `{"device_fingerprint":"a-phone","phone":"+15551234567","message":` + s + `,"send_at":"2099-01-01T00:00:00Z"}`, "message"},
			{"POST", "/automation/send-sms", a.apiKey, `{"device_fingerprint":"a-phone","phone":"+15551234567","message":` + s + `}`, "message"},
			{"POST", "/chat/send-bulk", a.apiKey, `{"device_fingerprint":"a-phone","messages":[{"phone":"+15551234567","message":"ok"},{"phone":"+15551234567","message":` + s + `}]}`, "messages[1].message"},
			{"POST", "/whatsapp/send", a.apiKey, `{"number_id":"` + wa + `","to":"+15551234567","content":` + s + `}`, "content"},
			{"PATCH", "/company", a.apiKey, `{"name":` + s + `}`, "name"},
			{"PATCH", "/users/me", a.access, `{"firstName":` + s + `}`, "firstName"},
			{"PATCH", "/device/a-phone", a.apiKey, `{"device_name":` + s + `}`, "device_name"},
			{"POST", "/pools", a.apiKey, `{"name":` + s + `,"members":[{"device_fingerprint":"a-phone","sim_slot":"SIM1"}]}`, "name"},
		} {
			r := e.do(call{method: c.method, path: c.path, token: c.token, body: c.body})
			e.want(r, http.StatusBadRequest, "validation_failed")
			if got := r.str("field"); got != c.field {
				t.Errorf("%s %s %+q: field %q, want %q; body %s", c.method, c.path, blank, got, c.field, r.Raw)
			}
		}
	}
	msgs := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551234567", token: a.apiKey})
	e.want(msgs, http.StatusOK, "")
	if list, _ := msgs.Body["messages"].([]any); len(list) != 0 { // nothing refused was stored, bulk's first item included
		t.Fatalf("stored messages: %s", msgs.Raw)
	}

	for _, text := range []string{" a ", "\u200bx", "😀", "❤\ufe0f"} {
		body, _ := json.Marshal(map[string]any{"device_fingerprint": "a-phone", "phone": "+15551234567", "message": text})
		e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: string(body)}), http.StatusOK, "")
	}
	msgs = e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=a-phone&phone=%2B15551234567&limit=10", token: a.apiKey})
	e.want(msgs, http.StatusOK, "")
	stored := map[string]bool{}
	list, _ := msgs.Body["messages"].([]any)
	for _, m := range list {
		stored[m.(map[string]any)["message"].(string)] = true
	}
	if len(list) != 4 || !stored[" a "] || !stored["\u200bx"] || !stored["😀"] || !stored["❤\ufe0f"] {
		t.Fatalf("stored messages are not the texts as sent: %s", msgs.Raw)
	}
	e.want(e.do(call{method: "PATCH", path: "/device/a-phone", token: a.apiKey, body: `{"device_name":"\u200bPixel"}`}), http.StatusOK, "")
}
