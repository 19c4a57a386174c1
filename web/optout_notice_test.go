package web_test

import (
	"net/http"
	"net/url"
	"strings"
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
	if got, want := noticeOf(t, ada.post("/console/opt-outs/remove", url.Values{"phone": {sender}})), "\u2068"+sender+"\u2069 is off the list."; got != want {
		t.Errorf("remove notice %q, want %q", got, want)
	}
	// A number needs no isolate, and gets none.
	if got, want := noticeOf(t, ada.post("/console/opt-outs", url.Values{"phone": {"+14155550100"}})), "+1 415-555-0100 is on the list: sends to it are refused."; got != want {
		t.Errorf("add notice %q, want %q", got, want)
	}
}

// TestOptOutNoticesWriteTheNumberAsTheListDoes: the notice of an added or
// removed number writes it in international format, as the list under it
// does ("+44 7400 123456"), not as the stored E.164 string, whatever way it
// was typed.
func TestOptOutNoticesWriteTheNumberAsTheListDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ada := e.acmeWithPhone()
	for _, c := range []struct{ path, typed, want string }{
		{"/console/opt-outs", "+447400123456", "+44 7400 123456 is on the list: sends to it are refused."},
		{"/console/opt-outs", "+44 (7400) 123-456", "+44 7400 123456 was on the list already."},
		{"/console/opt-outs/remove", "+447400123456", "+44 7400 123456 is off the list."},
	} {
		if got := noticeOf(t, ada.post(c.path, url.Values{"phone": {c.typed}})); got != c.want {
			t.Errorf("%s %q: notice %q, want %q", c.path, c.typed, got, c.want)
		}
	}
	if p := ada.get("/console/opt-outs"); p.status != http.StatusOK || !strings.Contains(p.body, "Nobody has opted out.") {
		t.Errorf("the list after the removal: %d", p.status)
	}
}
