package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The console's deletion of a device says what the API's DELETE
// /device/delete says (one text, device.DeletedNotice): the token ends,
// and the SMS and acked agent sends fail with device_deleted, words an
// operator finds again in the failed messages' error.
func TestConsoleDeviceDeletedNoticeSaysWhatTheAPISays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	p := b.post("/console/devices/fp-1/delete", nil)
	var out struct{ Notice string }
	if p.status != http.StatusOK || json.Unmarshal([]byte(p.body), &out) != nil {
		t.Fatalf("delete: %d %s", p.status, p.body)
	}
	for _, want := range []string{"Device deleted.", "token no longer works", "(device_deleted)", "had not acked", "holds their number"} {
		if !strings.Contains(out.Notice, want) {
			t.Errorf("notice %q does not say %q", out.Notice, want)
		}
	}
}
