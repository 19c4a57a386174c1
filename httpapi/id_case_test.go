package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestUUIDsAreReadInEitherCase: a queue id or an agent send's id written in
// upper case (RFC 9562 reads a UUID without regard to case, and many
// clients write it so) names the same message as in lower case, on every
// route and tool that takes one: GET and DELETE /chat/queue/{queueId},
// GET /whatsapp/messages/{id} and the message_status tool. It answered 404.
// The answer writes the id in lower case, as it was given out; another
// company's id is 404 in either case, and what is no UUID is not folded.
func TestUUIDsAreReadInEitherCase(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	e.pairPhone(a.apiKey, "a-phone")
	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: scheduledBody("a-phone", "+15551234567", "later", e.clock.Now().Add(time.Hour))})
	e.want(r, http.StatusOK, "")
	id := r.str("queueId")
	if id != strings.ToLower(id) || id == strings.ToUpper(id) {
		t.Fatalf("queue id %q: want a lower-case UUID", id)
	}
	upper := strings.ToUpper(id)
	mixed := strings.ToUpper(id[:18]) + id[18:]
	for _, v := range []string{upper, mixed} {
		q := e.do(call{method: "GET", path: "/chat/queue/" + v, token: a.apiKey})
		e.want(q, http.StatusOK, "")
		if q.str("queue_id") != id {
			t.Errorf("GET /chat/queue/%s: got %s, want queue_id %s", v, q.Raw, id)
		}
		e.want(e.do(call{method: "GET", path: "/chat/queue/" + v, token: b.apiKey}), http.StatusNotFound, "not_found")
		e.want(e.do(call{method: "DELETE", path: "/chat/queue/" + v, token: b.apiKey}), http.StatusNotFound, "not_found")
	}
	// Not a UUID: a letter past f, or braces, names nothing.
	for _, v := range []string{"G" + upper[1:], "{" + upper + "}", "urn:uuid:" + upper} {
		e.want(e.do(call{method: "GET", path: "/chat/queue/" + v, token: a.apiKey}), http.StatusNotFound, "not_found")
	}
	body, isErr := callTool(t, e.mcpClient(a.apiKey), "message_status", map[string]any{"id": upper})
	if isErr || body["queue_id"] != id {
		t.Errorf("message_status of %s: got %v", upper, body)
	}
	c := e.do(call{method: "DELETE", path: "/chat/queue/" + upper, token: a.apiKey})
	e.want(c, http.StatusOK, "")
	if q := e.queueStatus(a.apiKey, id); q.str("status") != "canceled" {
		t.Fatalf("after DELETE of the upper-case id: %s", q.Raw)
	}

	reg := e.pairPhone(a.apiKey, "agent-a")
	e.runAgent(reg, "agent-a", []string{waNumber}, nil, true)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	sent := e.waSend(a.apiKey, wa, "+15557654321", "hi")
	e.want(sent, http.StatusAccepted, "")
	wid := sent.str("id")
	m := e.do(call{method: "GET", path: "/whatsapp/messages/" + strings.ToUpper(wid), token: a.apiKey})
	e.want(m, http.StatusOK, "")
	if m.str("id") != wid {
		t.Errorf("GET /whatsapp/messages/%s: got %s", strings.ToUpper(wid), m.Raw)
	}
	e.want(e.do(call{method: "GET", path: "/whatsapp/messages/" + strings.ToUpper(wid), token: b.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "GET", path: "/imessage/messages/" + strings.ToUpper(wid), token: a.apiKey}), http.StatusNotFound, "not_found")
}
