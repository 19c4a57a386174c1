package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestOptOutNoticesIsolateTheEntry: the notice after removing an entry
// repeats it as typed; an entry a keyword added is listed as the phone
// reported its sender, which may be a name ending in a right-to-left
// override, so the notice isolates it as every other name in a notice is
// (bidi.Isolate), and the sentence after it reads left to right.
func TestOptOutNoticesIsolateTheEntry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ada := e.acmeWithPhone()
	const sender = "Bank\u202e"
	if _, _, err := e.store.AddOptOut(1, sender, time.Now()); err != nil { // as a STOP from that sender adds it
		t.Fatal(err)
	}
	notice := func(p page) string {
		t.Helper()
		var out struct{ Notice string }
		if p.status != http.StatusOK || json.Unmarshal([]byte(p.body), &out) != nil {
			t.Fatalf("%d %s", p.status, p.body)
		}
		return out.Notice
	}
	if got, want := notice(ada.post("/console/opt-outs/remove", url.Values{"phone": {sender}})), "\u2068"+sender+"\u2069 is off the list."; got != want {
		t.Errorf("remove notice %q, want %q", got, want)
	}
	// A number needs no isolate, and gets none.
	if got, want := notice(ada.post("/console/opt-outs", url.Values{"phone": {"+14155550100"}})), "+14155550100 is on the list: sends to it are refused."; got != want {
		t.Errorf("add notice %q, want %q", got, want)
	}
}
