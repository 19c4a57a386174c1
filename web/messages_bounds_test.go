package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/store"
)

// The messages page lists each conversation with its last message as a
// one-line preview: a preview is the text's first previewChars characters,
// not the whole text, so 200 conversations that each end with 10,000
// four-byte characters (the store's 4 MiB bound ends the list at 105 of
// them) are a page of kilobytes per conversation, not 4 MB of previews.
// The list cut short by the store's bound says that older ones exist.
func TestMessagesPagePreviewsAreShort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.acmeWithPhone()
	owner, err := e.store.UserByEmail("ada@acme.test")
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.store.CompanyDevice(owner.CompanyID, "fp-1")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("\U0001F600", 10000)
	const n = 110
	for i := range n {
		m := store.Message{UUID: fmt.Sprintf("in-%d", i), CompanyID: d.CompanyID, DeviceID: d.ID, Channel: "sms",
			Phone: fmt.Sprintf("+1555%07d", i), Text: text, SIMSlot: "SIM1", Segments: 1, ClientID: fmt.Sprintf("c%d", i)}
		if _, _, err := e.store.StoreInbound(&m, e.clock.Now); err != nil {
			t.Fatal(err)
		}
	}
	// The thread shown is the latest conversation's one message: 40 KB.
	p := b.get("/console/messages?device=fp-1")
	if p.status != http.StatusOK {
		t.Fatalf("messages page: %d", p.status)
	}
	if got := strings.Count(p.body, `<li data-phone=`); got < 100 {
		t.Fatalf("%d conversations listed, want the store's %d or so", got, (store.ConversationsText+len(text)-1)/len(text))
	}
	if len(p.body) > 1<<20 {
		t.Errorf("the messages page is %d bytes: the previews are whole texts", len(p.body))
	}
	t.Logf("the messages page of %d conversations: %d bytes", strings.Count(p.body, `<li data-phone=`), len(p.body))
	if !strings.Contains(p.body, `id="more-convs"`) {
		t.Errorf("a list the store cut short does not say that older conversations exist")
	}
}
