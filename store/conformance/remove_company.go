package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// RemovalStore is what the company removal suite needs: every kind of
// record, so the whole store.
type RemovalStore interface {
	store.Backend
}

// Filled is a company with at least one record of every kind
// (FillCompany), with what names them outside the company's own id.
type Filled struct {
	Company        store.Company
	Users          []store.User
	Devices        []store.Device
	Messages       []store.Message
	RefreshToken   []byte
	ConsoleSession []byte
	OneTimeToken   []byte
	Pairing        []byte
	Numbers        []store.AgentNumber
	Media          store.Media
	Customer       string
}

// FillCompany stores a company with at least one record of every kind:
// an admin, a member and a pending invitation, a refresh-token family, a
// console session, a one-time token, three devices (one deleted since,
// one disabled), the first with SIM caps, an unused pairing code, SMS
// sends (queued with an expiry, at a priority, scheduled, one under an
// idempotency key, one acked, one delivered, one failed by the carrier,
// one through a round-robin pool and one through a sticky one) and an
// inbound one, an agent number
// with a send handed to the device and an inbound message that took a
// media file, another
// file no message took, an opt-out, a pool, a webhook set whose events
// wait in the outbox with an attempt logged, a pending mail, and a
// canceled subscription with a payment provider's customer.
func FillCompany(t *testing.T, s RemovalStore) Filled {
	t.Helper()
	var f Filled
	c, admin := Company(t, s)
	f.Company = c
	n := unique()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("fill company %d: %s: %v", c.ID, what, err)
		}
	}
	member := store.User{CompanyID: c.ID, FirstName: "Bo", Email: fmt.Sprintf("member-%d@example.com", n), PasswordHash: "set", Role: store.RoleMember, EmailVerified: true, CreatedAt: T0}
	must("member", s.CreateUser(&member))
	invitee := store.User{CompanyID: c.ID, FirstName: "Cy", Email: fmt.Sprintf("invitee-%d@example.com", n), Role: store.RoleMember, InvitedBy: admin.ID, CreatedAt: T0}
	_, err := s.InviteUser(&invitee, T0)
	must("invitation", err)
	f.Users = []store.User{admin, member, invitee}
	f.RefreshToken = []byte(fmt.Sprintf("rt-%d", n))
	must("refresh family", s.StartRefreshFamily(f.RefreshToken, store.RefreshToken{UserID: admin.ID, Family: fmt.Sprintf("fam-%d", n), ExpiresAt: T0.Add(time.Hour)}, T0))
	f.ConsoleSession = []byte(fmt.Sprintf("cs-%d", n))
	must("console session", s.PutConsoleSession(f.ConsoleSession, store.ConsoleSession{UserID: member.ID, CompanyID: c.ID, CSRF: "csrf", CreatedAt: T0, SeenAt: T0, ExpiresAt: T0.Add(time.Hour)}))
	f.OneTimeToken = []byte(fmt.Sprintf("ott-%d", n))
	must("one-time token", s.PutOneTimeToken(f.OneTimeToken, store.OneTimeToken{Kind: "reset", UserID: admin.ID, ExpiresAt: T0.Add(time.Hour)}))

	d := Device(t, s, c.ID, fmt.Sprintf("fp-fill-%d", n))
	gone := Device(t, s, c.ID, fmt.Sprintf("fp-fill-gone-%d", n))
	_, err = s.DeleteDevice(c.ID, gone.Fingerprint, T0)
	must("delete a device", err)
	off := Device(t, s, c.ID, fmt.Sprintf("fp-fill-off-%d", n))
	_, err = s.UpdateDevice(c.ID, off.Fingerprint, func(d *store.Device) error {
		d.Status = store.DeviceDisabled
		return nil
	})
	must("disable a device", err)
	f.Devices = []store.Device{d, gone, off}
	_, err = s.SetSIMCaps(c.ID, d.Fingerprint, map[string]store.SIMCaps{"SIM1": {PerDay: 100, RecipientsPerDay: 50}}, T0)
	must("SIM caps", err)
	f.Pairing = []byte(fmt.Sprintf("pairing-fill-%d", n))
	must("pairing code", s.PutPairing(f.Pairing, store.Pairing{CompanyID: c.ID, ViaAPIKey: true, ExpiresAt: T0.Add(time.Hour)}, T0))

	clock := func() time.Time { return T0 }
	send := func(what string, edit func(*store.Message), key store.IdempotencyKey) store.Message {
		t.Helper()
		m := store.Message{UUID: fmt.Sprintf("fill-%d", unique()), CompanyID: c.ID, Device: d.Fingerprint, Channel: "sms",
			Phone: "+15550001234", Text: what, SIMSlot: "SIM1", Segments: 1}
		if edit != nil {
			edit(&m)
		}
		out, _, err := s.Enqueue(&m, key, clock, nil, func(m store.Message) (int, []byte) { return 202, []byte(m.UUID) })
		must("send "+what, err)
		f.Messages = append(f.Messages, out)
		return out
	}
	send("expiring", func(m *store.Message) { m.ExpiresAt = T0.Add(time.Hour) }, store.IdempotencyKey{})
	send("urgent", func(m *store.Message) { m.Priority = 5 }, store.IdempotencyKey{})
	send("later", func(m *store.Message) { m.SendAt = T0.Add(time.Hour) }, store.IdempotencyKey{})
	send("once", nil, store.IdempotencyKey{Key: fmt.Sprintf("k-%d", n), Route: "/message"})
	done := send("delivered", func(m *store.Message) { m.Phone = "+15550004321" }, store.IdempotencyKey{})
	for _, status := range []string{store.MsgSending, store.MsgSent, store.MsgDelivered} {
		_, _, err := s.Transition(c.ID, d.ID, done.UUID, status, "", "", T0)
		must("report "+status, err)
	}
	acked := send("acked", nil, store.IdempotencyKey{})
	_, _, err = s.Transition(c.ID, d.ID, acked.UUID, store.MsgSending, "", "", T0)
	must("ack", err)
	failed := send("failed", func(m *store.Message) { m.Phone = "+15550005555" }, store.IdempotencyKey{})
	for _, status := range []string{store.MsgSending, store.MsgFailed} {
		_, _, err := s.Transition(c.ID, d.ID, failed.UUID, status, "generic_failure", "", T0)
		must("report "+status, err)
	}
	f.Media, _, err = s.PutMedia(store.Media{ID: fmt.Sprintf("med_fill_%d", n), CompanyID: c.ID, DeviceID: d.ID, Key: "k/0", ContentType: "image/png", Filename: "a.png", Size: 3},
		bytes.NewReader([]byte("png")), T0)
	must("media", err)
	// An upload no message took yet, and one an inbound WhatsApp message takes.
	_, _, err = s.PutMedia(store.Media{ID: fmt.Sprintf("med_fill_orphan_%d", n), CompanyID: c.ID, DeviceID: d.ID, Key: "k/1", ContentType: "image/png", Filename: "b.png", Size: 3},
		bytes.NewReader([]byte("gif")), T0)
	must("media", err)
	in := store.Message{UUID: fmt.Sprintf("fill-in-%d", n), CompanyID: c.ID, DeviceID: d.ID, Channel: "sms",
		Phone: "+15550009999", Text: "hello", SIMSlot: "SIM1", Segments: 1, ClientID: fmt.Sprintf("c-%d", n)}
	got, _, err := s.StoreInbound(&in, clock)
	must("inbound", err)
	f.Messages = append(f.Messages, got)

	f.Numbers, err = s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, []string{fmt.Sprintf("+1555%07d", n%10000000)}, T0, 0)
	if err == nil && len(f.Numbers) != 1 {
		err = fmt.Errorf("%d numbers", len(f.Numbers))
	}
	must("announce a number", err)
	am := agentSend(c.ID, f.Numbers[0], "hi by WhatsApp")
	got, _, err = s.EnqueueAgent(&am, store.IdempotencyKey{}, clock, noVet, nil)
	must("agent send", err)
	f.Messages = append(f.Messages, got)
	_, err = s.AgentHandOut(c.ID, d.ID, got.ID)
	must("hand the agent send out", err)
	ai := inboundTo(d, f.Numbers[0].Address, fmt.Sprintf("wa-%d", n))
	ai.Media = []store.MediaRef{{ID: f.Media.ID}}
	got, _, err = s.StoreAgentInbound(&ai, clock)
	must("agent inbound", err)
	f.Messages = append(f.Messages, got)

	_, _, err = s.AddOptOut(c.ID, "+15550007777", T0)
	must("opt-out", err)
	for _, strategy := range []string{store.PoolRoundRobin, store.PoolSticky} {
		_, err = s.PutPool(c.ID, 0, T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: "pool " + strategy, Strategy: strategy, Members: []store.PoolMemberInput{{Device: d.Fingerprint, SIMSlot: "SIM1", DeviceID: d.ID}}}, nil
		})
		must("pool", err)
		send("through a pool", func(m *store.Message) { m.Device, m.SIMSlot, m.Pool = "", "", "pool "+strategy }, store.IdempotencyKey{})
	}

	set, err := s.UpdateWebhookSet(c.ID, T0, func(w *store.WebhookSet) error {
		w.Secret = fmt.Sprintf("whsec_%d", n)
		w.Entries = append(w.Entries, store.WebhookEntry{URL: "https://hooks.example.com/a", Active: true}, store.WebhookEntry{URL: "https://hooks.example.com/b", Active: true})
		return nil
	})
	must("webhook set", err)
	w := webhookTenant{company: c, device: d, set: set}
	mustAdd(t, s, w, T0)
	mustAdd(t, s, w, T0)
	due, _, err := s.DueWebhookDeliveries(T0.Add(time.Hour), 1000, nil)
	must("due deliveries", err)
	for _, dd := range due {
		if job, err := s.WebhookJob(dd.ID); err == nil && job.Delivery.CompanyID == c.ID {
			_, err := s.RecordWebhookAttempt(dd.ID, 100, outcome(store.WebhookPending, T0))
			must("webhook attempt", err)
			break
		}
	}

	mail := store.Mail{CompanyID: c.ID, To: admin.Email, Subject: "alert", Text: "t", State: "pending", CreatedAt: T0}
	must("mail", s.AppendCompanyMail(&mail, store.MailLimits{MaxPending: 10, MaxBytes: 1 << 20}))
	f.Customer = fmt.Sprintf("cus_fill_%d", n)
	_, err = s.UpdateSubscription(c.ID, func(sub *store.Subscription) error {
		sub.PlanID, sub.Status, sub.CustomerID, sub.ProviderSubID = "pro", "canceled", f.Customer, fmt.Sprintf("sub_fill_%d", n)
		return nil
	})
	must("subscription", err)
	return f
}

// RemoveCompany removes the company step by step, limit records a step,
// as admin delete-company does, and returns the sum of the steps and how
// many there were.
func RemoveCompany(t testing.TB, s RemovalStore, companyID uint64, limit int) (store.CompanyRemoval, int) {
	t.Helper()
	var total store.CompanyRemoval
	for steps := 1; ; steps++ {
		r, err := s.RemoveCompanyStep(companyID, limit)
		if err != nil {
			t.Fatalf("remove company %d, step %d: %v", companyID, steps, err)
		}
		total.Add(r)
		if r.Done {
			return total, steps
		}
		if steps > 100000 {
			t.Fatalf("remove company %d: %d steps and not done", companyID, steps)
		}
	}
}

// CompanyRemoval runs the suite of a company's removal.
func CompanyRemoval(t *testing.T, open Opener[RemovalStore]) {
	t.Run("Whole", func(t *testing.T) { t.Parallel(); removalWhole(t, open(t)) })
	t.Run("Resumed", func(t *testing.T) { t.Parallel(); removalResumed(t, open(t)) })
	t.Run("LinkedPhoneAfter", func(t *testing.T) { t.Parallel(); removalLinkedPhone(t, open(t)) })
	t.Run("InBatches", func(t *testing.T) { t.Parallel(); removalInBatches(t, open(t)) })
	t.Run("Closing", func(t *testing.T) { t.Parallel(); removalClosing(t, open(t)) })
	t.Run("OutwardFirst", func(t *testing.T) { t.Parallel(); removalOutwardFirst(t, open(t)) })
	t.Run("DeviceCompany", func(t *testing.T) { t.Parallel(); removalDeviceCompany(t, open(t)) })
	t.Run("ClosingInbound", func(t *testing.T) { t.Parallel(); removalClosingInbound(t, open(t)) })
}

// removalOutwardFirst: what leaves the server without a credential of the
// company, its pending webhook deliveries (sent by the server's workers)
// and its media files (served by signed links), goes with the removal's
// first step, before messages that take many steps: a closed company's
// endpoint gets no delivery and its links serve no file while the rest is
// removed.
func removalOutwardFirst(t *testing.T, s RemovalStore) {
	const many, limit = 400, 100
	kept := FillCompany(t, s)
	f := FillCompany(t, s)
	c := f.Company
	d := Device(t, s, c.ID, fmt.Sprintf("fp-outward-%d", unique())) // no SIM caps
	for i := 0; i < many; i += 200 {
		bulk := make([]store.Message, 200)
		for j := range bulk {
			bulk[j] = store.Message{UUID: fmt.Sprintf("outward-%d", unique()), CompanyID: c.ID, Device: d.Fingerprint, Channel: "sms",
				Phone: fmt.Sprintf("+1555%07d", j), Text: "one of many", SIMSlot: "SIM1", Segments: 1}
		}
		if _, _, err := s.EnqueueBulk(bulk, store.IdempotencyKey{}, func() time.Time { return T0 }, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	due, _, err := s.DueWebhookDeliveries(T0.Add(time.Hour), 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var deliveries []uint64
	for _, dd := range due {
		if job, err := s.WebhookJob(dd.ID); err == nil && job.Delivery.CompanyID == c.ID {
			deliveries = append(deliveries, dd.ID)
		}
	}
	if len(deliveries) == 0 {
		t.Fatal("the company has no pending webhook delivery to remove")
	}
	if _, err := s.MarkCompanyClosing(c.ID, T0, func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	r, err := s.RemoveCompanyStep(c.ID, limit)
	if err != nil || r.Done {
		t.Fatalf("the first step: %+v (%v), want one of several", r, err)
	}
	for _, id := range deliveries {
		if job, err := s.WebhookJob(id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("webhook delivery %d after the first step: %+v (%v), want ErrNotFound", id, job.Delivery, err)
		}
	}
	if md, err := s.MediaByID(0, f.Media.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the media file after the first step: %+v (%v), want ErrNotFound", md, err)
	}
	RemoveCompany(t, s, c.ID, limit)
	CheckRemoved(t, s, f)
	CheckKept(t, s, kept)
}

// removalClosing: marking a company closing runs the vet on the record
// and subscription the same transaction reads, writes nothing when the
// vet refuses, and otherwise marks the company (ClosingCompanies lists
// it) so that its subscription takes no write from then on (a checkout
// claim is refused as for a company that is gone); a second mark keeps
// the first without a vet, and the last removal step ends the listing.
func removalClosing(t *testing.T, s RemovalStore) {
	kept := FillCompany(t, s)
	gone := FillCompany(t, s)
	c := gone.Company
	at := T0.Add(time.Minute)
	if _, err := s.UpdateSubscription(c.ID, func(sub *store.Subscription) error {
		sub.Checkout = &store.Checkout{Claim: "claim-1", ClaimedAt: at}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("a checkout is being opened")
	_, err := s.MarkCompanyClosing(c.ID, at, func(co store.Company, sub store.Subscription, found bool) error {
		if co.ID != c.ID || !found || sub.Checkout == nil || sub.Checkout.Claim != "claim-1" {
			t.Errorf("the vet was given %+v, %+v (found %v), want the company and its claim", co, sub, found)
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("a mark the vet refuses: %v, want the vet's error", err)
	}
	if co, err := s.Company(c.ID); err != nil || !co.ClosingAt.IsZero() {
		t.Fatalf("the company after a refused mark: %+v (%v), want it stored, not closing", co, err)
	}
	if ids, err := s.ClosingCompanies(); err != nil || len(ids) != 0 {
		t.Fatalf("closing companies after a refused mark: %v (%v), want none", ids, err)
	}
	if _, err := s.UpdateSubscription(c.ID, func(sub *store.Subscription) error {
		sub.Checkout = nil
		return nil
	}); err != nil {
		t.Fatalf("the claim ended before a mark: %v", err)
	}
	early := []byte(fmt.Sprintf("pairing-before-closing-%d", unique()))
	if err := s.PutPairing(early, store.Pairing{CompanyID: c.ID, ExpiresAt: at.Add(time.Hour)}, at); err != nil {
		t.Fatal(err)
	}
	co, err := s.MarkCompanyClosing(c.ID, at, func(store.Company, store.Subscription, bool) error { return nil })
	if err != nil || !co.ClosingAt.Equal(at) {
		t.Fatalf("mark closing: %+v (%v), want closing at %v", co, err, at)
	}
	if got, err := s.Company(c.ID); err != nil || !got.ClosingAt.Equal(at) {
		t.Fatalf("the company marked closing reads %+v (%v)", got, err)
	}
	if ids, err := s.ClosingCompanies(); err != nil || len(ids) != 1 || ids[0] != c.ID {
		t.Fatalf("closing companies: %v (%v), want [%d]", ids, err, c.ID)
	}
	if ids, err := s.GoneCompanies([]uint64{c.ID, absentCompany}); err != nil || !slices.Equal(ids, []uint64{absentCompany}) {
		t.Errorf("companies gone of the closing one and one never stored: %v (%v), want [%d]: a closing company is stored", ids, err, absentCompany)
	}
	// From the mark on, the company's credentials are refused, though the
	// removal's first step has not taken them yet (or failed): a phone
	// whose link opens after the mark is not one DELETE /company misses,
	// and the API key works no more on a node whose cache forgot it.
	live := gone.Devices[0]
	if d, err := s.DeviceByTokenHash(live.TokenHash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the device token of a closing company: %+v (%v), want ErrNotFound", d, err)
	}
	if d, err := s.CompanyDevice(c.ID, live.Fingerprint); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a device of a closing company: %+v (%v), want ErrNotFound", d, err)
	}
	if co, err := s.CompanyByAPIKeyHash(c.APIKeyHash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the API key of a closing company: %+v (%v), want ErrNotFound", co, err)
	}
	if d, err := s.CompanyDevice(kept.Company.ID, kept.Devices[0].Fingerprint); err != nil || d.ID != kept.Devices[0].ID {
		t.Errorf("a device of another company: %+v (%v)", d, err)
	}
	// Nor does a user of it sign in: the user is not found (an access
	// token, a console session), and no sign-in record is stored for one.
	admin := gone.Users[0]
	if u, err := s.User(admin.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a user of a closing company: %+v (%v), want ErrNotFound", u, err)
	}
	if err := s.StartRefreshFamily([]byte(fmt.Sprintf("refresh-closing-%d", unique())), store.RefreshToken{UserID: admin.ID, Family: "closing", ExpiresAt: at.Add(time.Hour)}, at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refresh family of a closing company's user: %v, want ErrNotFound", err)
	}
	if err := s.PutConsoleSession([]byte(fmt.Sprintf("session-closing-%d", unique())), store.ConsoleSession{UserID: admin.ID, CompanyID: c.ID, CSRF: "csrf", CreatedAt: at, SeenAt: at, ExpiresAt: at.Add(time.Hour)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a console session of a closing company's user: %v, want ErrNotFound", err)
	}
	if err := s.PutOneTimeToken([]byte(fmt.Sprintf("link-closing-%d", unique())), store.OneTimeToken{UserID: admin.ID, Kind: "reset", ExpiresAt: at.Add(time.Hour)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an e-mailed link of a closing company's user: %v, want ErrNotFound", err)
	}
	// Its address finds no account (a login, a reset): but the address
	// stays the user's until the removal's first step takes it, so a new
	// account of it is refused until then, as one in use.
	if u, err := s.UserByEmail(admin.Email); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the address of a closing company's user: %+v (%v), want ErrNotFound", u, err)
	}
	anew := store.Company{Name: "Again", APIKeyHash: []byte(fmt.Sprintf("key-again-%d", unique()))}
	if err := s.CreateCompany(&anew, &store.User{Email: admin.Email, PasswordHash: "x", Role: store.RoleAdmin}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a new company whose owner has a closing company's address: %v, want ErrConflict", err)
	}
	if u, err := s.User(kept.Users[0].ID); err != nil || u.ID != kept.Users[0].ID {
		t.Errorf("a user of another company: %+v (%v)", u, err)
	}
	if u, err := s.UserByEmail(kept.Users[0].Email); err != nil || u.ID != kept.Users[0].ID {
		t.Errorf("the address of a user of another company: %+v (%v)", u, err)
	}
	if _, err := s.UpdateSubscription(c.ID, func(sub *store.Subscription) error {
		sub.Checkout = &store.Checkout{Claim: "claim-2", ClaimedAt: at}
		return nil
	}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a checkout claim under a closing company: %v, want ErrNotFound", err)
	}
	if ok, err := s.ApplyProviderEvent(fmt.Sprintf("evt-closing-%d", unique()), c.ID, "", 100, true, at, func(*store.Subscription, bool) bool { return true }); !errors.Is(err, store.ErrNotFound) || ok {
		t.Fatalf("a provider event for a closing company: %v (applied %v), want ErrNotFound", err, ok)
	}
	// A rotation of the API key (or any change of the record) that checked
	// its credential before the removal's first step took the key would
	// store a new key that works until the next step: a closing company
	// takes none.
	newKey := []byte(fmt.Sprintf("key-after-closing-%d", unique()))
	if _, err := s.UpdateCompany(c.ID, func(co *store.Company) error {
		co.APIKeyHash, co.Name = newKey, "Renamed"
		return nil
	}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a change of a closing company's record: %v, want ErrNotFound", err)
	}
	if _, err := s.CompanyByAPIKeyHash(newKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a key rotated under a closing company: %v, want ErrNotFound", err)
	}
	// Nor does the company take a new pairing code (a device registered
	// with it would work until the next step), opt-out, webhook set, pool
	// or mail: a request that checked its credential before the first step
	// writes nothing under the company after it.
	if err := s.PutPairing([]byte(fmt.Sprintf("pairing-closing-%d", unique())), store.Pairing{CompanyID: c.ID, ViaAPIKey: true, ExpiresAt: at.Add(time.Hour)}, at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a pairing code under a closing company: %v, want ErrNotFound", err)
	}
	// A pairing code made before the mark registers no device after it:
	// the phones linked at the closing are those of the devices read
	// after the mark (account.CloseCompany), and no other is made.
	if d, _, _, err := s.RegisterDevice(early, at, fmt.Sprintf("fp-closing-%d", unique()), func(store.Pairing, *store.Device) (store.Device, error) {
		return store.Device{Name: "late", Status: store.DeviceActive, TokenHash: []byte(fmt.Sprintf("token-closing-%d", unique())), CreatedAt: at}, nil
	}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a device registered under a closing company: %+v (%v), want ErrNotFound", d, err)
	}
	if _, _, err := s.AddOptOut(c.ID, "+15550007778", at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an opt-out under a closing company: %v, want ErrNotFound", err)
	}
	if _, err := s.UpdateWebhookSet(c.ID, at, func(w *store.WebhookSet) error {
		w.Entries = append(w.Entries, store.WebhookEntry{URL: "https://hooks.example.com/closing", Active: true})
		return nil
	}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a webhook set under a closing company: %v, want ErrNotFound", err)
	}
	if p, err := s.PutPool(c.ID, 0, at, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "late pool", Strategy: store.PoolRoundRobin}, nil
	}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a pool under a closing company: %+v (%v), want ErrNotFound", p, err)
	}
	closingMail := store.Mail{CompanyID: c.ID, To: "x@example.com", Subject: "alert", Text: "t", State: "pending", CreatedAt: at}
	if err := s.AppendCompanyMail(&closingMail, store.MailLimits{MaxPending: 10, MaxBytes: 1 << 20}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a mail of a closing company: %v, want ErrNotFound", err)
	}
	// Nor does a device of it take a link's hello (or a health report, a
	// presence): a phone whose token passed its upgrade before the mark
	// stores nothing after it. The store's word is that the device is gone
	// (ErrDeviceGone), as DeviceCompany says it: the phone is told so
	// (4503) on that word alone.
	if d, err := s.UpdateDeviceWith(c.ID, live.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		d.AppVersion, d.LastSeenAt = "after closing", at
		return nil, nil
	}); !errors.Is(err, store.ErrDeviceGone) {
		t.Errorf("a hello's write of a closing company's device: %+v (%v), want ErrDeviceGone", d, err)
	}
	if d, err := s.Device(live.Fingerprint); err != nil || d.AppVersion == "after closing" || d.LastSeenAt.Equal(at) {
		t.Errorf("a closing company's device after a hello's write: app version %q, last seen %v (%v), want them as before", d.AppVersion, d.LastSeenAt, err)
	}
	// Nor do its agents' numbers move (an agent's hello, whose device
	// write came before the mark): refused as the device gone, and
	// nothing stored, neither a new number nor one it held let go.
	held := gone.Numbers[0]
	announced := []store.Announced{{Channel: store.ChannelNameWhatsApp, Addresses: []string{"+15559990001"}}, {Channel: store.ChannelNameIMessage}}
	if nums, err := s.AnnounceAgentNumbers(c.ID, held.DeviceID, announced, at, 0); !errors.Is(err, store.ErrDeviceGone) {
		t.Errorf("numbers announced by an agent of a closing company: %+v (%v), want ErrDeviceGone", nums, err)
	}
	if nums, err := s.AgentNumbers(c.ID, store.ChannelNameWhatsApp); err != nil || len(nums) != 1 || nums[0].Address != held.Address || nums[0].DeviceID != held.DeviceID {
		t.Errorf("a closing company's WhatsApp numbers after an announcement: %+v (%v), want only %s, held as before", nums, err, held.Address)
	}
	again, err := s.MarkCompanyClosing(c.ID, at.Add(time.Hour), func(store.Company, store.Subscription, bool) error {
		t.Error("the vet ran for a company already closing")
		return nil
	})
	if err != nil || !again.ClosingAt.Equal(at) {
		t.Fatalf("a second mark: %+v (%v), want the first kept", again, err)
	}
	if _, err := s.MarkCompanyClosing(absentCompany, at, func(store.Company, store.Subscription, bool) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("mark an absent company closing: %v, want ErrNotFound", err)
	}
	RemoveCompany(t, s, c.ID, 1000)
	if ids, err := s.ClosingCompanies(); err != nil || len(ids) != 0 {
		t.Fatalf("closing companies after the removal: %v (%v), want none", ids, err)
	}
	CheckRemoved(t, s, gone)
	CheckKept(t, s, kept)
	if _, err := s.UpdateSubscription(kept.Company.ID, func(*store.Subscription) error { return nil }); err != nil {
		t.Fatalf("the subscription of another company: %v", err)
	}
}

// removalInBatches: a company of many messages is removed in steps of
// at most the limit's messages each, the first of them taking its
// credentials too, and the last its record.
func removalInBatches(t *testing.T, s RemovalStore) {
	const many, limit = 1200, 100
	kept := FillCompany(t, s)
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-many-%d", unique()))
	for i := 0; i < many; i += 200 {
		bulk := make([]store.Message, 200)
		for j := range bulk {
			bulk[j] = store.Message{UUID: fmt.Sprintf("many-%d", unique()), CompanyID: c.ID, Device: d.Fingerprint, Channel: "sms",
				Phone: fmt.Sprintf("+1555%07d", j), Text: "one of many", SIMSlot: "SIM1", Segments: 1}
		}
		if _, _, err := s.EnqueueBulk(bulk, store.IdempotencyKey{}, func() time.Time { return T0 }, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	var total store.CompanyRemoval
	steps := 0
	for !total.Done {
		steps++
		r, err := s.RemoveCompanyStep(c.ID, limit)
		if err != nil {
			t.Fatalf("step %d: %v", steps, err)
		}
		if r.Messages > limit {
			t.Fatalf("step %d removed %d messages, more than the limit %d", steps, r.Messages, limit)
		}
		if !r.Done {
			if _, err := s.Company(c.ID); err != nil {
				t.Fatalf("the company after step %d, not the last: %v", steps, err)
			}
		}
		total.Add(r)
	}
	if total.Messages != many || steps < many/limit {
		t.Fatalf("removed %d messages in %d steps, want %d in %d or more", total.Messages, steps, many, many/limit)
	}
	if _, err := s.Company(c.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the company after the last step: %v", err)
	}
	CheckKept(t, s, kept)
}

// CheckRemoved fails t for every way the store still answers for the
// removed company f: its record, key, users and addresses, tokens and
// sessions, devices and their tokens, pairing code, messages, numbers,
// media, customer.
func CheckRemoved(t testing.TB, s RemovalStore, f Filled) {
	t.Helper()
	c := f.Company
	notFound := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("removed company %d: %s: %v, want ErrNotFound", c.ID, what, err)
		}
	}
	_, err := s.Company(c.ID)
	notFound("the company", err)
	_, err = s.CompanyByAPIKeyHash(c.APIKeyHash)
	notFound("its API key", err)
	for _, u := range f.Users {
		_, err = s.User(u.ID)
		notFound(fmt.Sprintf("user %d", u.ID), err)
		if u.InvitedBy == 0 || u.PasswordHash != "" {
			_, err = s.UserByEmail(u.Email)
			notFound("the address "+u.Email, err)
		}
	}
	if users, err := s.CompanyUsers(c.ID); err != nil || len(users) != 0 {
		t.Errorf("removed company %d: users %+v (%v), want none", c.ID, users, err)
	}
	_, err = s.ConsoleSession(f.ConsoleSession)
	notFound("the console session", err)
	_, err = s.RotateRefreshToken(f.RefreshToken, []byte(fmt.Sprintf("rt-next-%d", unique())), T0.Add(2*time.Hour), T0)
	notFound("the refresh token", err)
	_, err = s.ConsumeOneTimeToken(f.OneTimeToken, []string{"reset"}, T0, false, func(*store.User) error { return nil })
	notFound("the one-time token", err)
	_, err = s.Pairing(f.Pairing)
	notFound("the pairing code", err)
	for _, d := range f.Devices {
		_, err = s.DeviceByTokenHash(d.TokenHash)
		notFound("the token of device "+d.Fingerprint, err)
		_, err = s.CompanyDevice(c.ID, d.Fingerprint)
		notFound("device "+d.Fingerprint, err)
	}
	for _, m := range f.Messages {
		_, err = s.MessageByUUID(c.ID, m.UUID)
		notFound("message "+m.UUID, err)
	}
	for _, num := range f.Numbers {
		_, err = s.AgentNumber(c.ID, num.Channel, num.PublicID)
		notFound("number "+num.PublicID, err)
	}
	_, err = s.MediaByID(c.ID, f.Media.ID)
	notFound("the media file", err)
	if _, found, err := s.CompanyByCustomer(f.Customer); err != nil || found {
		t.Errorf("removed company %d: its customer %s found %v (%v)", c.ID, f.Customer, found, err)
	}
	if _, found, err := s.Subscription(c.ID); err != nil || found {
		t.Errorf("removed company %d: its subscription found %v (%v)", c.ID, found, err)
	}
	if ids, err := s.CompanyIDs(); err != nil {
		t.Error(err)
	} else {
		for _, id := range ids {
			if id == c.ID {
				t.Errorf("removed company %d is still listed", c.ID)
			}
		}
	}
	if gone, err := s.GoneCompanies([]uint64{c.ID, c.ID}); err != nil || !slices.Equal(gone, []uint64{c.ID}) {
		t.Errorf("removed company %d: GoneCompanies answers %v (%v), want it once", c.ID, gone, err)
	}
	_, err = s.RemoveCompanyStep(c.ID, 10)
	notFound("a removal again", err)
}

// CheckKept fails t for a company whose records the store no longer
// answers as f stored them.
func CheckKept(t testing.TB, s RemovalStore, f Filled) {
	t.Helper()
	c := f.Company
	if _, err := s.Company(c.ID); err != nil {
		t.Errorf("kept company %d: %v", c.ID, err)
	}
	if gone, err := s.GoneCompanies([]uint64{c.ID}); err != nil || len(gone) != 0 {
		t.Errorf("kept company %d: GoneCompanies answers %v (%v), want none", c.ID, gone, err)
	}
	if got, err := s.CompanyByAPIKeyHash(c.APIKeyHash); err != nil || got.ID != c.ID {
		t.Errorf("kept company %d: its key gives %d (%v)", c.ID, got.ID, err)
	}
	if users, err := s.CompanyUsers(c.ID); err != nil || len(users) != len(f.Users) {
		t.Errorf("kept company %d: %d users (%v), want %d", c.ID, len(users), err, len(f.Users))
	}
	if _, err := s.ConsoleSession(f.ConsoleSession); err != nil {
		t.Errorf("kept company %d: its console session: %v", c.ID, err)
	}
	if _, err := s.DeviceByTokenHash(f.Devices[0].TokenHash); err != nil {
		t.Errorf("kept company %d: its device's token: %v", c.ID, err)
	}
	for _, m := range f.Messages {
		if _, err := s.MessageByUUID(c.ID, m.UUID); err != nil {
			t.Errorf("kept company %d: message %s: %v", c.ID, m.UUID, err)
		}
	}
	if _, err := s.MediaByID(c.ID, f.Media.ID); err != nil {
		t.Errorf("kept company %d: its media: %v", c.ID, err)
	}
	if id, found, err := s.CompanyByCustomer(f.Customer); err != nil || !found || id != c.ID {
		t.Errorf("kept company %d: its customer gives %d %v (%v)", c.ID, id, found, err)
	}
}

// removalWhole: a company with a record of every kind is removed whole,
// in one step or in steps of one record; another company of every kind
// is kept.
func removalWhole(t *testing.T, s RemovalStore) {
	kept := FillCompany(t, s)
	for _, limit := range []int{100000, 1} {
		gone := FillCompany(t, s)
		total, steps := RemoveCompany(t, s, gone.Company.ID, limit)
		if total.Messages != int64(len(gone.Messages)) || total.Users != int64(len(gone.Users)) || total.Devices != 2 || total.Records == 0 {
			t.Errorf("limit %d: removed %+v, want %d messages, %d users, 2 live devices and records", limit, total, len(gone.Messages), len(gone.Users))
		}
		if limit == 1 && steps < len(gone.Messages) {
			t.Errorf("limit 1: %d steps for %d messages", steps, len(gone.Messages))
		}
		CheckRemoved(t, s, gone)
		CheckKept(t, s, kept)
	}
}

// removalResumed: a removal stopped after a step, before its end, leaves
// the company, its credentials gone (its API key, users and devices no
// longer answer), and a second run removes the rest.
func removalResumed(t *testing.T, s RemovalStore) {
	kept := FillCompany(t, s)
	gone := FillCompany(t, s)
	r, err := s.RemoveCompanyStep(gone.Company.ID, 2)
	if err != nil || r.Done {
		t.Fatalf("a first step of 2: %+v (%v), want not done", r, err)
	}
	if _, err := s.Company(gone.Company.ID); err != nil {
		t.Fatalf("the company after a first step: %v, want it kept until the last", err)
	}
	if _, err := s.CompanyByAPIKeyHash(gone.Company.APIKeyHash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the API key after a first step: %v, want ErrNotFound", err)
	}
	if _, err := s.DeviceByTokenHash(gone.Devices[0].TokenHash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the device token after a first step: %v, want ErrNotFound", err)
	}
	if _, err := s.User(gone.Users[0].ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the admin after a first step: %v, want ErrNotFound", err)
	}
	RemoveCompany(t, s, gone.Company.ID, 3)
	CheckRemoved(t, s, gone)
	CheckKept(t, s, kept)
}

// removalLinkedPhone: a phone of the company still linked when its
// company is removed (its server not told) writes nothing afterwards: its
// inbound messages, reports and device changes are refused, as is a send,
// from the first step on. The records a server that still holds the
// company's API key (cached) could write are refused once the company is
// gone, and those written midway go with the last step.
func removalLinkedPhone(t *testing.T, s RemovalStore) {
	for _, midway := range []bool{true, false} {
		f := FillCompany(t, s)
		c := f.Company
		d := Device(t, s, c.ID, fmt.Sprintf("fp-outward-%d", unique())) // no SIM caps
		if midway {
			if r, err := s.RemoveCompanyStep(c.ID, 1); err != nil || r.Done {
				t.Fatalf("a first step: %+v (%v)", r, err)
			}
		} else {
			RemoveCompany(t, s, c.ID, 1000)
		}
		clock := func() time.Time { return T0.Add(time.Minute) }
		in := store.Message{UUID: fmt.Sprintf("late-in-%d", unique()), CompanyID: c.ID, DeviceID: d.ID, Channel: "sms",
			Phone: "+15550008888", Text: "late", SIMSlot: "SIM1", Segments: 1, ClientID: fmt.Sprintf("late-%d", unique())}
		if _, _, err := s.StoreInbound(&in, clock); err == nil {
			t.Errorf("midway %v: an inbound SMS of the removed company's phone was stored", midway)
		}
		ai := inboundTo(d, f.Numbers[0].Address, fmt.Sprintf("late-wa-%d", unique()))
		if _, _, err := s.StoreAgentInbound(&ai, clock); err == nil {
			t.Errorf("midway %v: an inbound WhatsApp message of the removed company's phone was stored", midway)
		}
		out := store.Message{UUID: fmt.Sprintf("late-out-%d", unique()), CompanyID: c.ID, Device: d.Fingerprint, Channel: "sms",
			Phone: "+15550001234", Text: "late", SIMSlot: "SIM1", Segments: 1}
		if _, _, err := s.Enqueue(&out, store.IdempotencyKey{}, clock, nil, nil); err == nil {
			t.Errorf("midway %v: a send of the removed company was stored", midway)
		}
		if _, _, err := s.Transition(c.ID, d.ID, f.Messages[0].UUID, store.MsgSending, "", "", T0); err == nil {
			t.Errorf("midway %v: a report on a removed message was taken", midway)
		}
		if _, err := s.UpdateDeviceByID(c.ID, d.ID, func(*store.Device) error { return nil }); err == nil {
			t.Errorf("midway %v: the removed device was updated", midway)
		}
		if _, err := s.UpdateDeviceWith(c.ID, d.ID, func(*store.Device) ([]store.DeviceEvent, error) { return nil, nil }); !errors.Is(err, store.ErrDeviceGone) {
			t.Errorf("midway %v: a hello's write of the removed device: %v, want ErrDeviceGone", midway, err)
		}
		// What a server that still holds the company's API key in its
		// cache may write under it: refused once the company is gone;
		// midway, removed with it by the last step.
		pairing := []byte(fmt.Sprintf("late-pairing-%d", unique()))
		late := map[string]error{}
		_, _, late["an opt-out"] = s.AddOptOut(c.ID, "+15550006666", T0)
		_, late["a pool"] = s.PutPool(c.ID, 0, T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: "late", Strategy: "round_robin"}, nil
		})
		_, late["a webhook set"] = s.UpdateWebhookSet(c.ID, T0, func(w *store.WebhookSet) error {
			w.Secret = "late"
			return nil
		})
		late["a pairing code"] = s.PutPairing(pairing, store.Pairing{CompanyID: c.ID, ViaAPIKey: true, ExpiresAt: T0.Add(time.Hour)}, T0)
		mail := store.Mail{CompanyID: c.ID, To: "ops@example.com", Subject: "late", Text: "t", State: "pending", CreatedAt: T0}
		late["a company mail"] = s.AppendCompanyMail(&mail, store.MailLimits{MaxPending: 10, MaxBytes: 1 << 20})
		_, _, late["an upload"] = s.PutMedia(store.Media{ID: fmt.Sprintf("med_late_%d", unique()), CompanyID: c.ID, DeviceID: d.ID, Key: "late/0", ContentType: "image/png", Size: 1}, bytes.NewReader([]byte("a")), T0)
		_, late["a number"] = s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, []string{"+15559990000"}, T0, 0)
		_, late["SIM caps"] = s.SetSIMCaps(c.ID, d.Fingerprint, map[string]store.SIMCaps{"SIM1": {PerDay: 1}}, T0)
		_, late["a subscription"] = s.UpdateSubscription(c.ID, func(sub *store.Subscription) error {
			sub.PlanID = "pro"
			return nil
		})
		// A sign-in that checked a removed user's password before the
		// first step stores its session, refresh family or e-mailed link
		// after it: refused, midway too (the users went with the first
		// step, and nothing the later steps read names them any more).
		u := f.Users[0]
		lateRefresh, lateSession, lateLink := []byte(fmt.Sprintf("late-rt-%d", unique())), []byte(fmt.Sprintf("late-cs-%d", unique())), []byte(fmt.Sprintf("late-ott-%d", unique()))
		signIn := map[string]error{
			"a refresh family": s.StartRefreshFamily(lateRefresh, store.RefreshToken{UserID: u.ID, Family: fmt.Sprintf("late-fam-%d", unique()), ExpiresAt: T0.Add(time.Hour)}, T0),
			"a console session": s.PutConsoleSession(lateSession, store.ConsoleSession{UserID: u.ID, CompanyID: c.ID, CSRF: "late",
				CreatedAt: T0, SeenAt: T0, ExpiresAt: T0.Add(time.Hour)}),
			"a one-time token": s.PutOneTimeToken(lateLink, store.OneTimeToken{Kind: "reset", UserID: u.ID, ExpiresAt: T0.Add(time.Hour)}),
		}
		for what, err := range signIn {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("midway %v: %s of the removed user: %v, want ErrNotFound", midway, what, err)
			}
		}
		for what, err := range late {
			if !midway && err == nil {
				t.Errorf("%s was stored under the removed company", what)
			}
		}
		// Those an API request makes say the company is not found (404),
		// on both stores alike, not a broken foreign key (500).
		for _, what := range []string{"an opt-out", "a pool", "a webhook set", "a pairing code"} {
			if err := late[what]; !midway && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s under the removed company: %v, want ErrNotFound", what, err)
			}
		}
		if midway {
			RemoveCompany(t, s, c.ID, 1000)
		}
		if on, err := s.OptedOut(c.ID, "+15550006666"); err != nil || on {
			t.Errorf("midway %v: the late opt-out: %v (%v)", midway, on, err)
		}
		if pools, err := s.Pools(c.ID); err != nil || len(pools) != 0 {
			t.Errorf("midway %v: the late pool: %+v (%v)", midway, pools, err)
		}
		if set, err := s.WebhookSet(c.ID); err != nil || set.Secret != "" || len(set.Entries) != 0 {
			t.Errorf("midway %v: the late webhook set: %+v (%v)", midway, set, err)
		}
		if _, err := s.Pairing(pairing); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("midway %v: the late pairing code: %v", midway, err)
		}
		if n, size, err := s.MailOutboxSize(c.ID); err != nil || n != 0 || size != 0 {
			t.Errorf("midway %v: the late mail: %d, %d bytes (%v)", midway, n, size, err)
		}
		if _, found, err := s.Subscription(c.ID); err != nil || found {
			t.Errorf("midway %v: the late subscription: %v (%v)", midway, found, err)
		}
		for _, uuid := range []string{in.UUID, ai.UUID, out.UUID} {
			if _, err := s.MessageByUUID(c.ID, uuid); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("midway %v: late message %s: %v, want ErrNotFound", midway, uuid, err)
			}
		}
		CheckRemoved(t, s, f)
	}
}
