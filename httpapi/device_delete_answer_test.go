package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// DELETE /device/delete says what becomes of the device's sends: its SMS
// fail, but the WhatsApp and iMessage sends it was handed and had not
// acked go to the agent that holds their number (PROTOCOL.md 16.1). An
// answer that said every queued message failed sent an operator moving a
// number to another agent to send those again, twice.
func TestDeleteDeviceAnswerSaysWhatBecomesOfAgentSends(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "delanswer@example.com")
	e.pairPhone(a.apiKey, "old-agent")
	r := e.do(call{method: "DELETE", path: "/device/delete/old-agent", token: a.apiKey})
	e.want(r, http.StatusOK, "")
	msg := r.str("message")
	for _, want := range []string{"token no longer works", "SMS", "failed", "device_deleted", "had not acked", "holds their number"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "its queued messages failed") {
		t.Errorf("message %q says every queued message failed", msg)
	}
}
