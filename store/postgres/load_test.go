package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/conformance"
	"github.com/simrelay/simrelay/store/postgres"
)

var t0 = conformance.T0

// copied is what copyFixture wrote into its embedded store, for the checks.
type copied struct {
	companies     []uint64
	emails        []string // every user's address, pending invitees' included
	fingerprints  map[uint64][]string
	deleted       store.Device // a registration deleted before the copy
	refresh       []byte       // a refresh token's hash, unspent
	invitation    []byte       // the pending invitee's one-time token's hash
	session       []byte       // a console session's hash
	apiKeyHash    []byte       // the rotated key of the first company
	uuids         []string     // the first company's messages
	idemKey       store.IdempotencyKey
	queued        store.Message // a send waiting in phone-a's queue
	pool          uint64
	webhook       uint64            // an entry of the first company's webhook set
	number        store.AgentNumber // the second company's WhatsApp number
	agentUUIDs    []string          // its messages
	lastDeviceID  uint64
	lastCompanyID uint64
}

// copyFixture writes, with today's code, an embedded store holding a
// record of every kind both backends copy, and returns its directory.
func copyFixture(t *testing.T) (string, copied) {
	t.Helper()
	dir := t.TempDir()
	b, err := boltstore.Open(dir, boltstore.Options{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var f copied
	f.fingerprints = map[uint64][]string{}
	c1, admin := conformance.Company(t, b)
	c2, other := conformance.Company(t, b)
	f.companies = []uint64{c1.ID, c2.ID}
	f.emails = []string{admin.Email, other.Email, "Bea@Example.com", "new@example.com"}
	must(b.CreateUser(&store.User{CompanyID: c1.ID, Email: "Bea@Example.com", PasswordHash: "set", Role: store.RoleMember, CreatedAt: t0}))
	invitee := store.User{CompanyID: c1.ID, Email: "new@example.com", Role: store.RoleMember, CreatedAt: t0}
	if _, err := b.InviteUser(&invitee, t0); err != nil {
		t.Fatal(err)
	}
	phone := conformance.Device(t, b, c1.ID, "phone-a")
	f.deleted = conformance.Device(t, b, c1.ID, "phone-gone")
	_, err = b.DeleteDevice(c1.ID, "phone-gone", t0.Add(time.Minute))
	must(err)
	conformance.Device(t, b, c2.ID, "phone-b")
	f.fingerprints[c1.ID] = []string{"phone-a"}
	f.fingerprints[c2.ID] = []string{"phone-b"}
	f.lastDeviceID = 3

	f.apiKeyHash = []byte("rotated-key-hash")
	_, err = b.UpdateCompany(c1.ID, func(c *store.Company) error {
		c.APIKeyHash, c.APIKeyCreatedAt = f.apiKeyHash, t0.Add(2*time.Minute)
		return nil
	})
	must(err)
	_, err = b.UpdateSubscription(c2.ID, func(s *store.Subscription) error {
		s.PlanID, s.CustomerID = "pro", "cus_123"
		return nil
	})
	must(err)

	// Messages: queued (one with an Idempotency-Key), scheduled, delivered
	// (counted), inbound; an opt-out.
	clock := func() time.Time { return t0 }
	send := func(uuid string, sendAt time.Time, key store.IdempotencyKey) store.Message {
		t.Helper()
		m := store.Message{UUID: uuid, CompanyID: c1.ID, Device: "phone-a", Channel: "sms", Phone: "+15550001111", Text: "hello " + uuid, SIMSlot: "SIM1", Segments: 1, SendAt: sendAt}
		out, _, err := b.Enqueue(&m, key, clock, nil, func(m store.Message) (int, []byte) { return 202, []byte(m.UUID) })
		must(err)
		f.uuids = append(f.uuids, uuid)
		return out
	}
	f.idemKey = store.IdempotencyKey{Route: "POST /messages", Key: "key-1", Digest: "digest-1"}
	f.queued = send("m-queued", time.Time{}, f.idemKey)
	send("m-later", t0.Add(time.Hour), store.IdempotencyKey{})
	send("m-done", time.Time{}, store.IdempotencyKey{})
	_, _, err = b.Transition(c1.ID, phone.ID, "m-done", store.MsgDelivered, "", "", t0.Add(time.Minute))
	must(err)
	in, _, err := b.StoreInbound(&store.Message{CompanyID: c1.ID, DeviceID: phone.ID, Channel: "sms", Phone: "+15550002222", Text: "hi", SIMSlot: "SIM1", ClientID: "client-1", UUID: "m-in"}, clock)
	must(err)
	f.uuids = append(f.uuids, in.UUID)
	_, _, err = b.AddOptOut(c1.ID, "+15550003333", t0)
	must(err)

	// A sticky pool and a send through it, SIM caps, and a send failed
	// with a carrier error (a device failure, a SIM's streak).
	pool, err := b.PutPool(c1.ID, 0, t0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "Sales", Strategy: store.PoolSticky, Fallback: store.PoolRoundRobin,
			Members: []store.PoolMemberInput{{Device: "phone-a", SIMSlot: "SIM1"}}}, nil
	})
	must(err)
	f.pool = pool.ID
	_, err = b.SetSIMCaps(c1.ID, "phone-a", map[string]store.SIMCaps{"SIM1": {PerDay: 100, RecipientsPerDay: 10}}, t0)
	must(err)
	viaPool := store.Message{UUID: "m-pool", CompanyID: c1.ID, Pool: "Sales", Channel: "sms", Phone: "+15550004444", Text: "pooled", Segments: 1}
	_, _, err = b.Enqueue(&viaPool, store.IdempotencyKey{}, clock, nil, nil)
	must(err)
	f.uuids = append(f.uuids, "m-pool")
	for i := range store.CarrierErrorStreak {
		uuid := fmt.Sprintf("m-failed-%d", i)
		send(uuid, time.Time{}, store.IdempotencyKey{})
		_, _, err = b.Transition(c1.ID, phone.ID, uuid, store.MsgFailed, "no_service", "", t0.Add(time.Minute))
		must(err)
	}

	// Webhooks: a set of two entries, an inbound message's event with a
	// delivery to each, one of them tried once; a mail; an upload.
	set, err := b.UpdateWebhookSet(c1.ID, t0, func(set *store.WebhookSet) error {
		set.Secret = "whsec"
		set.Entries = []store.WebhookEntry{{URL: "https://hooks.example/a", Active: true}, {URL: "https://hooks.example/b", Active: true}}
		return nil
	})
	must(err)
	b.SetInboundEvents(store.InboundEvents{Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
		if m.ClientID != "client-2" {
			return store.WebhookEvent{}, nil, nil
		}
		var ds []store.WebhookDelivery
		for i, e := range set.Entries {
			ds = append(ds, store.WebhookDelivery{UUID: fmt.Sprintf("dl-%d", i), EventType: "sms:received", WebhookID: e.ID, CreatedAt: t0, NextAttemptAt: t0})
		}
		return store.WebhookEvent{ID: "ev-1", Body: []byte(`{"event":"sms:received"}`)}, ds, nil
	}})
	hooked, _, err := b.StoreInbound(&store.Message{CompanyID: c1.ID, DeviceID: phone.ID, Channel: "sms", Phone: "+15550002222", Text: "hooked", SIMSlot: "SIM1", ClientID: "client-2", UUID: "m-hooked"}, clock)
	must(err)
	f.uuids = append(f.uuids, hooked.UUID)
	f.webhook = set.Entries[0].ID
	_, err = b.RecordWebhookAttempt(1, 0, func(d store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt {
		return store.WebhookAttempt{State: store.WebhookPending, StatusCode: 500, CreatedAt: t0.Add(time.Minute), NextAttemptAt: t0.Add(time.Hour)}
	})
	must(err)
	must(b.AppendMail(&store.Mail{To: "ana@example.com", Subject: "Welcome", Text: "hi", State: "pending", CreatedAt: t0}))
	must(b.AppendCompanyMail(&store.Mail{CompanyID: c1.ID, To: "ana@example.com", Subject: "SMS from +15550002222", Text: "hooked", State: "pending", CreatedAt: t0}, store.MailLimits{}))
	_, _, err = b.PutMedia(store.Media{ID: "media-1", CompanyID: c1.ID, DeviceID: phone.ID, Key: "client-3/0", ContentType: "image/png", Size: 5}, strings.NewReader("12345"), t0)
	must(err)

	// An agent's WhatsApp number, a send through it and a message to it; a
	// billing event applied.
	agent := conformance.Device(t, b, c2.ID, "agent-1")
	nums, err := b.AnnounceNumbers(c2.ID, agent.ID, store.ChannelNameWhatsApp, []string{"+15550005555"}, t0, 0)
	must(err)
	f.number = nums[0]
	wa := store.Message{UUID: "wa-out", CompanyID: c2.ID, Channel: store.ChannelNameWhatsApp, NumberRef: f.number.PublicID, Phone: "+15557654321", Text: "hola", ContentType: "text", Segments: 1}
	noVet := func(store.AgentNumber, func(time.Time) []time.Time) (func(), error) { return func() {}, nil }
	_, _, err = b.EnqueueAgent(&wa, store.IdempotencyKey{}, clock, noVet, nil)
	must(err)
	waIn := store.Message{UUID: "wa-in", CompanyID: c2.ID, DeviceID: agent.ID, Channel: store.ChannelNameWhatsApp, Phone: "+15557654321", Account: "+15550005555", Text: "hi", ContentType: "text", Segments: 1, ClientID: "wa-client-1"}
	_, _, err = b.StoreAgentInbound(&waIn, clock)
	must(err)
	f.agentUUIDs = []string{"wa-out", "wa-in"}
	_, err = b.ApplyProviderEvent("evt_1", c2.ID, "cus_123", t0.Unix(), true, t0, func(sub *store.Subscription, stale bool) bool { return true })
	must(err)

	f.refresh = []byte("refresh-1")
	must(b.StartRefreshFamily(f.refresh, store.RefreshToken{UserID: admin.ID, Family: "family-1", ExpiresAt: t0.Add(time.Hour)}, t0))
	f.invitation = []byte("invitation-1")
	must(b.PutOneTimeToken(f.invitation, store.OneTimeToken{Kind: "invite", UserID: invitee.ID, ExpiresAt: t0.Add(time.Hour)}))
	f.session = []byte("session-1")
	must(b.PutConsoleSession(f.session, store.ConsoleSession{UserID: admin.ID, CompanyID: c1.ID, CSRF: "csrf", CreatedAt: t0, SeenAt: t0, ExpiresAt: t0.Add(time.Hour)}))
	_, err = b.Secret("jwt", 32)
	must(err)
	f.lastCompanyID = c2.ID
	return dir, f
}

// copyReader is what the copy's checks read of both stores.
type copyReader interface {
	CompanyIDs() ([]uint64, error)
	Company(companyID uint64) (store.Company, error)
	CompanyByAPIKeyHash(hash []byte) (store.Company, error)
	CompanyUsers(companyID uint64) ([]store.User, error)
	UserByEmail(email string) (store.User, error)
	CompanyDevices(companyID uint64) ([]store.Device, error)
	ConsoleSession(hash []byte) (store.ConsoleSession, error)
	Secret(name string, size int) ([]byte, error)
	MessageByUUID(companyID uint64, uuid string) (store.Message, error)
	OptOuts(companyID uint64, after string, limit int) ([]store.OptOut, error)
	StorageUsed(companyID uint64, t time.Time) (int64, error)
	Usage(companyID uint64, periodStart time.Time) (messages int64, devices int, err error)
	NextDue() (at time.Time, ok bool, err error)
	Pools(companyID uint64) ([]store.Pool, error)
	DeviceFailures(companyID, deviceID uint64) ([]store.DeviceFailure, error)
	SIMUsages(companyID uint64, fingerprint string, now time.Time) ([]store.SIMUsage, error)
	CarrierFailing(companyID uint64, now time.Time) (map[uint64][]string, error)
	MessageSequence() (uint64, error)
	Pending(companyID, deviceID uint64, after uint64, limit int, now time.Time, moved func([]store.Message)) ([]store.Message, error)
	History(companyID uint64, device, phone string, page, limit int) ([]store.Message, int, error)
	Conversations(companyID uint64, device string, limit int) ([]store.Conversation, error)
	InboundList(q store.InboundQuery) ([]store.Message, error)
	StatsTotals(companyID uint64) (store.Counts, error)
	Stats(q store.StatsQuery) (store.Stats, error)
	StatsDevices(companyID uint64) ([]store.StatsDevice, error)
	DashboardSummary(companyID uint64, from, to time.Time, limit int) (store.Summary, error)
	WebhookSet(companyID uint64) (store.WebhookSet, error)
	WebhookOutboxSize(companyID uint64) (deliveries int, bytes int64, err error)
	DueWebhookDeliveries(now time.Time, limit int, skip store.DueSkip) ([]store.WebhookDue, time.Time, error)
	WebhookJob(deliveryID uint64) (store.WebhookJob, error)
	WebhookAttempts(companyID, webhookID uint64, limit int) ([]store.WebhookAttempt, error)
	Mails(pendingOnly bool) ([]store.Mail, error)
	MailOutboxSize(companyID uint64) (pending int, bytes int64, err error)
	MediaByKey(companyID, deviceID uint64, key string) (store.Media, error)
	CopyMedia(w io.Writer, mediaID string, off, n int64) (int64, error)
	AgentNumbers(companyID uint64, channel string) ([]store.AgentNumber, error)
	AgentMessages(companyID, numberID uint64, page, limit int) ([]store.Message, int, error)
	AgentSendTimes(companyID, numberID uint64, since time.Time) ([]time.Time, error)
	Subscription(companyID uint64) (sub store.Subscription, found bool, err error)
	CompanyByCustomer(customerID string) (companyID uint64, found bool, err error)
}

// openPG opens a store on a new database.
func openPG(t *testing.T, url string) *postgres.Store {
	t.Helper()
	pg, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	return pg
}

// same fails t unless a and b read the same as JSON.
func same(t *testing.T, what string, a, b any) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("%s:\nembedded   %s\npostgresql %s", what, ja, jb)
	}
}

// A store written by today's code, copied from a read-only open, answers
// the same on PostgreSQL through every domain's reads; each kind counts the
// same on both sides; the copied tokens, keys, queues and pools work on;
// new ids follow the copied ones; and a second copy into the same database
// is refused.
func TestLoadACopy(t *testing.T) {
	t.Parallel()
	dir, f := copyFixture(t)
	src, err := boltstore.Open(dir, boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	want, err := src.CopyCounts()
	if err != nil {
		t.Fatal(err)
	}
	pg := openPG(t, pgtest.URL(t))
	if missing := store.Uncopied(want, src, pg); len(missing) > 0 {
		t.Fatalf("the fixture holds kinds the copy cannot take: %v", missing)
	}
	if err := pg.Load(src.Dump); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if err := pg.Load(src.Dump); !errors.Is(err, store.ErrNotEmpty) {
		t.Errorf("a second Load into the same database: %v, want ErrNotEmpty", err)
	}
	src.Close()
	got, err := pg.CopyCounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range pg.LoadKinds() {
		if got[k] != want[k] {
			t.Errorf("%s: %d in PostgreSQL, %d in the embedded store", k, got[k], want[k])
		}
		if want[k] == 0 {
			t.Errorf("the fixture holds no %s", k)
		}
	}
	b, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sameReads(t, b, pg, f)
	afterCopy(t, pg, f)
}

// sameReads fails t unless pg answers every read the checks know as b does.
func sameReads(t *testing.T, b *boltstore.Store, pg *postgres.Store, f copied) {
	t.Helper()
	answers := func(what string, read func(s copyReader) (any, error)) {
		t.Helper()
		want, werr := read(b)
		got, gerr := read(pg)
		if werr != nil || gerr != nil {
			t.Errorf("%s: embedded %v, postgresql %v", what, werr, gerr)
		}
		same(t, what, want, got)
	}
	c1, c2 := f.companies[0], f.companies[1]
	phoneA, err := b.CompanyDevice(c1, "phone-a")
	if err != nil {
		t.Fatal(err)
	}
	answers("company ids", func(s copyReader) (any, error) { return s.CompanyIDs() })
	for _, cid := range f.companies {
		answers(fmt.Sprintf("company %d", cid), func(s copyReader) (any, error) { return s.Company(cid) })
		answers(fmt.Sprintf("users of company %d", cid), func(s copyReader) (any, error) { return s.CompanyUsers(cid) })
		answers(fmt.Sprintf("devices of company %d", cid), func(s copyReader) (any, error) { return s.CompanyDevices(cid) })
	}
	answers("the rotated key", func(s copyReader) (any, error) { return s.CompanyByAPIKeyHash(f.apiKeyHash) })
	for _, email := range f.emails {
		answers("user "+email, func(s copyReader) (any, error) {
			u, err := s.UserByEmail(email)
			if errors.Is(err, store.ErrNotFound) {
				return "not found", nil // a pending invitee holds no address
			}
			return u, err
		})
	}
	answers("console session", func(s copyReader) (any, error) { return s.ConsoleSession(f.session) })
	answers("secret", func(s copyReader) (any, error) { return s.Secret("jwt", 32) })
	if _, err := pg.CompanyDevice(f.deleted.CompanyID, f.deleted.Fingerprint); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted device: %v, want ErrNotFound", err)
	}

	for _, uuid := range f.uuids {
		answers("message "+uuid, func(s copyReader) (any, error) { return s.MessageByUUID(c1, uuid) })
	}
	answers("opt-outs", func(s copyReader) (any, error) { return s.OptOuts(c1, "", 10) })
	answers("storage used", func(s copyReader) (any, error) { return s.StorageUsed(c1, t0) })
	from, _ := store.CalendarMonth(t0)
	answers("usage", func(s copyReader) (any, error) {
		n, d, err := s.Usage(c1, from)
		return []any{n, d}, err
	})
	answers("next due", func(s copyReader) (any, error) {
		at, ok, err := s.NextDue()
		return []any{at, ok}, err
	})
	answers("pools", func(s copyReader) (any, error) { return s.Pools(c1) })
	answers("device failures", func(s copyReader) (any, error) { return s.DeviceFailures(c1, phoneA.ID) })
	answers("SIM usages", func(s copyReader) (any, error) { return s.SIMUsages(c1, "phone-a", t0.Add(time.Minute)) })
	answers("carrier failing", func(s copyReader) (any, error) { return s.CarrierFailing(c1, t0.Add(2*time.Minute)) })
	answers("message sequence", func(s copyReader) (any, error) { return s.MessageSequence() })
	answers("phone-a's queue", func(s copyReader) (any, error) {
		ms, err := s.Pending(c1, phoneA.ID, 0, 100, t0.Add(2*time.Minute), func([]store.Message) {})
		var places []string
		for _, m := range ms {
			places = append(places, fmt.Sprintf("%s@%d", m.UUID, m.QueuePlace()))
		}
		return places, err
	})
	answers("history", func(s copyReader) (any, error) {
		ms, n, err := s.History(c1, "phone-a", "+15550001111", 1, 100)
		return []any{ms, n}, err
	})
	answers("conversations", func(s copyReader) (any, error) { return s.Conversations(c1, "phone-a", 100) })
	answers("inbound", func(s copyReader) (any, error) { return s.InboundList(store.InboundQuery{CompanyID: c1, Limit: 100}) })
	day := store.StatsDay(t0)
	answers("stats totals", func(s copyReader) (any, error) { return s.StatsTotals(c1) })
	answers("stats", func(s copyReader) (any, error) {
		st, err := s.Stats(store.StatsQuery{CompanyID: c1, From: day - 1, To: day + 1})
		st.RecordsRead = 0 // how each backend reads, not what
		return st, err
	})
	answers("stats of the API key's sends and inbound", func(s copyReader) (any, error) {
		st, err := s.Stats(store.StatsQuery{CompanyID: c1, From: day - 1, To: day + 1, Users: map[uint64]bool{0: true, store.StatsNoUser: true}})
		st.RecordsRead = 0
		if st.Totals.IsZero() {
			return nil, errors.New("nothing counted")
		}
		return st, err
	})
	answers("stats devices", func(s copyReader) (any, error) { return s.StatsDevices(c1) })
	answers("dashboard", func(s copyReader) (any, error) {
		return s.DashboardSummary(c1, t0.Add(-time.Hour), t0.Add(time.Hour), 100)
	})
	answers("webhook set", func(s copyReader) (any, error) { return s.WebhookSet(c1) })
	answers("webhook outbox", func(s copyReader) (any, error) {
		n, size, err := s.WebhookOutboxSize(c1)
		return []any{n, size}, err
	})
	answers("due deliveries", func(s copyReader) (any, error) {
		due, next, err := s.DueWebhookDeliveries(t0.Add(2*time.Hour), 100, nil)
		return []any{due, next}, err
	})
	for _, d := range []uint64{1, 2} {
		answers(fmt.Sprintf("webhook job %d", d), func(s copyReader) (any, error) { return s.WebhookJob(d) })
	}
	answers("webhook attempts", func(s copyReader) (any, error) { return s.WebhookAttempts(c1, f.webhook, 100) })
	answers("mails", func(s copyReader) (any, error) { return s.Mails(false) })
	answers("mail outbox", func(s copyReader) (any, error) {
		n, size, err := s.MailOutboxSize(c1)
		if err == nil && n != 1 {
			err = fmt.Errorf("%d of the company's mails pending, want 1", n)
		}
		return []any{n, size}, err
	})
	answers("media by key", func(s copyReader) (any, error) { return s.MediaByKey(c1, phoneA.ID, "client-3/0") })
	answers("media bytes", func(s copyReader) (any, error) {
		var buf bytes.Buffer
		_, err := s.CopyMedia(&buf, "media-1", 0, -1)
		return buf.String(), err
	})
	answers("agent numbers", func(s copyReader) (any, error) { return s.AgentNumbers(c2, store.ChannelNameWhatsApp) })
	answers("agent messages", func(s copyReader) (any, error) {
		ms, n, err := s.AgentMessages(c2, f.number.ID, 1, 100)
		return []any{ms, n}, err
	})
	answers("agent send times", func(s copyReader) (any, error) { return s.AgentSendTimes(c2, f.number.ID, t0.Add(-time.Hour)) })
	answers("subscription", func(s copyReader) (any, error) {
		sub, found, err := s.Subscription(c2)
		return []any{sub, found}, err
	})
	answers("company by customer", func(s copyReader) (any, error) {
		c, found, err := s.CompanyByCustomer("cus_123")
		return []any{c, found}, err
	})
}

// afterCopy fails t unless what was copied works on in pg: keys, tokens,
// queues, pools and billing events, and ids follow the copied ones.
func afterCopy(t *testing.T, pg *postgres.Store, f copied) {
	t.Helper()
	c1 := f.companies[0]
	answer := func(m store.Message) (int, []byte) { return 202, []byte(m.UUID) }
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t0.Add(d) } }

	// The key's answer replays; a new send queues behind the copied one.
	retry := store.Message{UUID: "m-retry", CompanyID: c1, Device: "phone-a", Channel: "sms", Phone: "+15550001111", Text: "again", SIMSlot: "SIM1", Segments: 1}
	if _, prior, err := pg.Enqueue(&retry, f.idemKey, at(time.Minute), nil, answer); err != nil || prior == nil || string(prior.Body) != "m-queued" {
		t.Errorf("a retry with the copied key: %+v, %v; want the first answer", prior, err)
	}
	next := store.Message{UUID: "m-next", CompanyID: c1, Device: "phone-a", Channel: "sms", Phone: "+15550001111", Text: "next", SIMSlot: "SIM1", Segments: 1}
	if m, _, err := pg.Enqueue(&next, store.IdempotencyKey{}, at(time.Minute), nil, answer); err != nil || m.QueuePlace() <= f.queued.QueuePlace() || m.ID <= f.queued.ID {
		t.Errorf("a send after the copy: place %d, id %d, %v; want both above the copied send's %d and %d", m.QueuePlace(), m.ID, err, f.queued.QueuePlace(), f.queued.ID)
	}

	// The pool passes over the failing SIM as the embedded store does, and
	// after the cool-down sends from the member the recipient stuck to.
	sticky := store.Message{UUID: "m-sticky", CompanyID: c1, Pool: "Sales", Channel: "sms", Phone: "+15550004444", Text: "again", Segments: 1}
	if _, _, err := pg.Enqueue(&sticky, store.IdempotencyKey{}, at(2*time.Minute), nil, nil); !errors.As(err, new(*store.PoolUnavailableError)) {
		t.Errorf("a send through the copied pool while its SIM fails: %v, want a *PoolUnavailableError", err)
	}
	if m, _, err := pg.Enqueue(&sticky, store.IdempotencyKey{}, at(time.Minute+store.CarrierErrorCooldown), nil, nil); err != nil || m.Device != "phone-a" || m.PoolID != f.pool {
		t.Errorf("a send through the copied pool: %+v, %v", m, err)
	}

	if applied, err := pg.ApplyProviderEvent("evt_1", f.companies[1], "cus_123", t0.Unix(), true, t0, func(*store.Subscription, bool) bool { return true }); err != nil || applied {
		t.Errorf("the copied billing event again: applied %t, %v; want it known", applied, err)
	}

	// The copied tokens work, once.
	if _, err := pg.RotateRefreshToken(f.refresh, []byte("refresh-2"), t0.Add(2*time.Hour), t0.Add(time.Minute)); err != nil {
		t.Errorf("rotate the copied refresh token: %v", err)
	}
	if _, err := pg.RotateRefreshToken(f.refresh, []byte("refresh-3"), t0.Add(2*time.Hour), t0.Add(time.Minute)); !errors.Is(err, store.ErrTokenReused) {
		t.Errorf("the copied refresh token again: %v, want ErrTokenReused", err)
	}
	u, err := pg.ConsumeOneTimeToken(f.invitation, []string{"invite"}, t0.Add(time.Minute), false, func(u *store.User) error {
		u.PasswordHash = "now-set"
		return nil
	})
	if err != nil {
		t.Errorf("accept the copied invitation: %v", err)
	} else if held, err := pg.UserByEmail("NEW@example.com"); err != nil || held.ID != u.ID {
		t.Errorf("the invitee after accepting: %+v, %v; want user %d", held, err, u.ID)
	}

	// New ids follow the copied ones: a company, and a registration of the
	// deleted handset.
	c, _ := conformance.Company(t, pg)
	if c.ID <= f.lastCompanyID {
		t.Errorf("a company made after the copy got id %d, not above %d", c.ID, f.lastCompanyID)
	}
	if d := conformance.Device(t, pg, f.deleted.CompanyID, f.deleted.Fingerprint); d.ID <= f.lastDeviceID {
		t.Errorf("a registration made after the copy got id %d, not above %d", d.ID, f.lastDeviceID)
	}
	copiedHolders(t, pg, f)
}

// copiedHolders: the copied registrations say what they hold
// (Device.NoNumbers), and their hellos on PostgreSQL agree with the copied
// numbers: the agent that holds the WhatsApp number may hold one, and its
// hello finds it; a phone that never announced one holds none, and its
// hello reads nothing more. The copy is the one write besides
// AnnounceNumbers that gives a registration numbers; a record saying none
// while it holds one would keep a hello of none from letting them go.
func copiedHolders(t *testing.T, pg *postgres.Store, f copied) {
	t.Helper()
	hello := func(d store.Device) store.Device {
		t.Helper()
		got, err := pg.UpdateDeviceWith(d.CompanyID, d.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
			d.LastSeenAt = t0
			return nil, nil
		})
		if err != nil {
			t.Fatalf("the hello of %s after the copy: %v", d.Fingerprint, err)
		}
		return got
	}
	agent, err := pg.CompanyDevice(f.number.CompanyID, "agent-1")
	if err != nil || agent.ID != f.number.DeviceID || agent.NoNumbers {
		t.Fatalf("the copied agent: id %d, holds none %v (%v); want the number's holder %d, which may hold one", agent.ID, agent.NoNumbers, err, f.number.DeviceID)
	}
	if got := hello(agent); got.NoNumbers {
		t.Errorf("the copied agent's hello says it holds none, while it holds %s", f.number.Address)
	}
	phone, err := pg.CompanyDevice(f.companies[0], "phone-a")
	if err != nil || !phone.NoNumbers {
		t.Errorf("the copied SMS phone: holds none %v (%v), want true", phone.NoNumbers, err)
	}
	if got := hello(phone); !got.NoNumbers {
		t.Errorf("the copied SMS phone's hello says it may hold a number")
	}
	if _, err := pg.AnnounceNumbers(agent.CompanyID, agent.ID, store.ChannelNameWhatsApp, nil, t0, 0); err != nil {
		t.Fatal(err)
	}
	if got := hello(agent); !got.NoNumbers {
		t.Errorf("the copied agent's hello after it let its number go says it may hold one")
	}
}

// A copy that fails part way leaves the database as it was: empty, ready
// for another try.
func TestLoadFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	pg := openPG(t, pgtest.URL(t))
	boom := errors.New("the source failed")
	err := pg.Load(func(put func(store.CopyRecord) error) error {
		if err := put(store.CopyCompany{Company: store.Company{ID: 7, Name: "Half", APIKeyHash: []byte("k"), CreatedAt: t0}}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Load: %v, want the source's error", err)
	}
	counts, err := pg.CopyCounts()
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range counts {
		if n != 0 {
			t.Errorf("%s: %d after a failed load, want 0", k, n)
		}
	}
	// A kind the loader does not take fails the load, naming it.
	err = pg.Load(func(put func(store.CopyRecord) error) error { return put(unknownRecord{}) })
	if err == nil {
		t.Error("a record of a kind PostgreSQL does not take was loaded")
	}
}

type unknownRecord struct{}

func (unknownRecord) CopyKind() store.Kind { return "unknown things" }
