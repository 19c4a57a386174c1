package webhook

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// TestEmailEntrySchemeInAnyCase: a scheme's case means nothing (RFC 3986
// 3.1), so MAILTO: and Mailto: name e-mail entries. PUT accepts them and
// stores the scheme in lower case, the address as written; and the
// delivery side reads a stored URL the same way, so an entry whose scheme
// is stored in another case (by hand, or by a copy of the store) is sent
// as e-mail, not posted as a URL.
func TestEmailEntrySchemeInAnyCase(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	svc, inbox := f.mailing()

	for _, url := range []string{"MAILTO:ana@example.com", "Mailto:ana@example.com", " mailTO:ana@example.com "} {
		got, err := svc.Replace(context.Background(), f.company, []EntryInput{{URL: url}})
		if err != nil || len(got) != 1 || got[0].URL != "mailto:ana@example.com" {
			t.Errorf("PUT %q: got %+v, %v; want it stored as mailto:ana@example.com", url, got, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if _, err := f.st.UpdateWebhookSet(f.company, time.Now(), func(set *store.WebhookSet) error {
		set.Entries[0].URL = "MAILTO:ana@example.com"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	m := f.inbound(svc, f.device, "SIM1", time.Now())
	got := inbox.WaitFor(t, "ana@example.com", 10*time.Second)
	if got.Subject != "SMS from "+m.Phone {
		t.Errorf("mail subject %q, want the SMS's sender", got.Subject)
	}
	eventually(t, "the delivery is logged as handed to the mail outbox", func() bool {
		lines := f.lines()
		return len(lines) == 1 && lines[0].StatusCode == http.StatusAccepted
	})
}
