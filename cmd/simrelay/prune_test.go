package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// The hourly prune drops what has done its job and warns about each e-mail
// that never went out.
func TestPruneStore(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "admin@acme.test")
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	old := now.Add(-mailKeepUnsent - time.Hour)
	if err := st.AppendMail(&store.Mail{To: "lost@x.test", Subject: "Verify", State: store.MailFailed, CreatedAt: old}); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendMail(&store.Mail{To: "ok@x.test", State: store.MailSent, CreatedAt: now.Add(-mailKeepDone - time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutPairing([]byte("h"), store.Pairing{CompanyID: c.ID, ExpiresAt: now.Add(-pairingKeep - time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	noop := func(*store.Subscription, bool) bool { return false }
	for id, at := range map[string]time.Time{"evt_old": now.Add(-billingEventsKeep - time.Hour), "evt_recent": now.Add(-billingEventsKeep + time.Hour)} {
		if _, err := st.ApplyProviderEvent(id, c.ID, "", 1, false, at, noop); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	pruneStore(st, now, slog.New(slog.NewTextHandler(&buf, nil)))
	if mails, _ := st.Mails(false); len(mails) != 0 {
		t.Fatalf("got %d mails left, want 0", len(mails))
	}
	if _, err := st.Pairing([]byte("h")); err == nil {
		t.Fatal("the expired pairing code is still there")
	}
	if applied, err := st.ApplyProviderEvent("evt_old", c.ID, "", 1, false, now, noop); err != nil || !applied {
		t.Fatalf("the old provider event again: applied %v (%v), want its id pruned", applied, err)
	}
	if applied, err := st.ApplyProviderEvent("evt_recent", c.ID, "", 1, false, now, noop); err != nil || applied {
		t.Fatalf("the recent provider event again: applied %v (%v), want its id kept", applied, err)
	}
	if log := buf.String(); !strings.Contains(log, "never sent") || !strings.Contains(log, "lost@x.test") {
		t.Fatalf("got log %q, want a warning naming the unsent mail", log)
	}
}
