package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
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

// The prune deletes every upload no message named within the orphan age,
// however many batches they take, and leaves the younger ones.
func TestPruneMediaTakesEveryBatch(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "admin@acme.test")
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := st.ProvisionDevices([]store.Device{{Fingerprint: "pixel-1", CompanyID: c.ID, Name: "pixel-1", Status: store.DeviceActive,
		SelectedSIM: "BOTH", TokenHash: []byte("token"), CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	dev, err := st.CompanyDevice(c.ID, "pixel-1")
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, at time.Time) {
		m := store.Media{ID: "med_" + strings.ReplaceAll(key, "/", "_"), CompanyID: c.ID, DeviceID: dev.ID, Key: key, ContentType: "text/plain", Size: 2}
		if _, _, err := st.PutMedia(m, strings.NewReader("hi"), at); err != nil {
			t.Fatal(err)
		}
	}
	const old = 5
	for i := range old {
		put(fmt.Sprintf("old/%d", i), now.Add(-store.DefaultMediaOrphanAge-time.Hour))
	}
	put("young/0", now.Add(-time.Hour))
	n, err := pruneMedia(st, now.Add(-store.DefaultMediaOrphanAge), 2)
	if err != nil || n != old {
		t.Fatalf("pruned %d uploads (%v), want the %d older than the orphan age", n, err, old)
	}
	for i := range old {
		if _, err := st.MediaByKey(c.ID, dev.ID, fmt.Sprintf("old/%d", i)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("old upload %d after the prune: %v, want it deleted", i, err)
		}
	}
	if _, err := st.MediaByKey(c.ID, dev.ID, "young/0"); err != nil {
		t.Errorf("the young upload after the prune: %v, want it kept", err)
	}
}

// The hourly prune removes the sign-ups whose owner never verified the
// address, abandonedSignupKeep after they were made, batch by batch until
// it has looked at every company, and keeps the younger ones.
func TestPruneStoreAbandonedSignups(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	now := time.Date(2026, 12, 20, 10, 0, 0, 0, time.UTC)
	old, young := now.Add(-abandonedSignupKeep-time.Minute), now.Add(-abandonedSignupKeep+time.Minute)
	var gone []store.Company
	for i := range 5 {
		c, _, _ := conformance.Signup(t, st, fmt.Sprintf("stranger-%d@example.com", i), old)
		gone = append(gone, c)
	}
	kept, _, _ := conformance.Signup(t, st, "newcomer@example.com", young)
	var buf bytes.Buffer
	pruneStore(st, now, slog.New(slog.NewTextHandler(&buf, nil)))
	for _, c := range gone {
		if _, err := st.Company(c.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("abandoned company %d: %v, want it removed", c.ID, err)
		}
	}
	if _, err := st.Company(kept.ID); err != nil {
		t.Errorf("the young sign-up: %v, want it kept", err)
	}
	if log := buf.String(); !strings.Contains(log, "removed abandoned sign-ups") || !strings.Contains(log, "count=5") {
		t.Errorf("got log %q, want the removal of 5 abandoned sign-ups", log)
	}
	// In batches of 2: every company is looked at.
	for i := range 5 {
		conformance.Signup(t, st, fmt.Sprintf("late-%d@example.com", i), old)
	}
	if n, err := pruneAbandonedSignups(st, now.Add(-abandonedSignupKeep), now, 2); err != nil || n != 5 {
		t.Fatalf("in batches of 2: removed %d (%v), want 5", n, err)
	}
}
