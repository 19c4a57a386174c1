package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// The lists bounded by their texts (a device's conversations at
// store.ConversationsText, an export's pages at store.ExportPageText)
// leave the rows past the bound in the database: the query ends the page,
// so the server is not sent 40 KB rows it then drops. 200 conversations
// each ending with 10,000 four-byte characters: the database sent 8 MB for
// a list that keeps 4 MiB, and 8 MB for an export page that keeps 1 MiB.
func TestTextBoundedListsLeaveTheRestInTheDatabase(t *testing.T) {
	t.Parallel()
	relay := pgtest.Relay(t, migrated(t))
	s := openURL(t, relay.URL, Options{})
	c, _ := conformance.Company(t, s)
	d := conformance.Device(t, s, c.ID, "fp-long")
	text := strings.Repeat("\U0001F600", 10000)
	const n = 200
	for i := range n {
		m := store.Message{UUID: fmt.Sprintf("in-%d", i), CompanyID: c.ID, DeviceID: d.ID, Channel: "sms",
			Phone: fmt.Sprintf("+1555%07d", i), Text: text, SIMSlot: "SIM1", Segments: 1, ClientID: fmt.Sprintf("c%d", i)}
		if _, _, err := s.StoreInbound(&m, func() time.Time { return time.Now() }); err != nil {
			t.Fatal(err)
		}
	}
	sent := func(what string, bound int, read func() (int, error)) {
		t.Helper()
		before := relay.FromDatabase()
		got, err := read()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got >= n {
			t.Fatalf("%s: %d rows, want the bound to end it", what, got)
		}
		// Each row kept is about its text, JSON-escaped in its record; the
		// page's own bound plus one row, and a margin for the records.
		if b := relay.FromDatabase() - before; b > int64(bound+len(text))*5/4 {
			t.Errorf("%s: the database sent %d bytes for %d rows (a bound of %d bytes of text)", what, b, got, bound)
		}
	}
	sent("Conversations", store.ConversationsText, func() (int, error) {
		convs, err := s.Conversations(c.ID, d.Fingerprint, 1000)
		return len(convs), err
	})
	sent("ConversationsAfter", store.ExportPageText, func() (int, error) {
		convs, err := s.ConversationsAfter(c.ID, d.ID, "", 500)
		return len(convs), err
	})
	sent("CompanyMessagesAfter", store.ExportPageText, func() (int, error) {
		msgs, _, _, err := s.CompanyMessagesAfter(c.ID, 0, 500)
		return len(msgs), err
	})
}
