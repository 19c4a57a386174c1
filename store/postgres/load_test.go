package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	in, _, err := b.StoreInbound(&store.Message{CompanyID: c1.ID, DeviceID: phone.ID, Channel: "sms", Phone: "+15550002222", Text: "hi", SIMSlot: "SIM1", ClientID: "client-1", UUID: "m-in"}, clock, nil)
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
// the same on PostgreSQL: companies (a rotated key found by its hash),
// users (a pending invitee holds no address), live devices, tokens,
// sessions and secrets; each kind counts the same on both sides; new ids
// follow the copied ones; and a second copy into the same database is
// refused.
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
	}
	for _, k := range []store.Kind{store.KindCompanies, store.KindUsers, store.KindDevices, store.KindPairings, store.KindSubscriptions,
		store.KindStorageUsage, store.KindActivity, store.KindTokenFamilies, store.KindRefreshTokens, store.KindOneTimeTokens,
		store.KindConsoleSessions, store.KindSecrets, store.KindMessages, store.KindIdempotency, store.KindOptOuts, store.KindStats, store.KindPlanUsage,
		store.KindDeviceFailures, store.KindPools, store.KindStickyEntries, store.KindSIMCaps, store.KindSIMCounts} {
		if want[k] == 0 {
			t.Errorf("the fixture holds no %s", k)
		}
	}

	b, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ids, err := pg.CompanyIDs()
	if err != nil || !slices.Equal(ids, f.companies) {
		t.Errorf("CompanyIDs: %v, %v; want %v", ids, err, f.companies)
	}
	for _, cid := range f.companies {
		bc, _ := b.Company(cid)
		pc, err := pg.Company(cid)
		if err != nil {
			t.Errorf("company %d: %v", cid, err)
		}
		same(t, fmt.Sprintf("company %d", cid), bc, pc)
		bu, _ := b.CompanyUsers(cid)
		pu, err := pg.CompanyUsers(cid)
		if err != nil {
			t.Errorf("users of company %d: %v", cid, err)
		}
		same(t, fmt.Sprintf("users of company %d", cid), bu, pu)
		for _, fp := range f.fingerprints[cid] {
			bd, _ := b.CompanyDevice(cid, fp)
			pd, err := pg.CompanyDevice(cid, fp)
			if err != nil {
				t.Errorf("device %s: %v", fp, err)
			}
			same(t, "device "+fp, bd, pd)
		}
	}
	if c, err := pg.CompanyByAPIKeyHash(f.apiKeyHash); err != nil || c.ID != f.companies[0] {
		t.Errorf("the rotated key finds company %d, %v; want %d", c.ID, err, f.companies[0])
	}
	for _, email := range f.emails {
		bu, berr := b.UserByEmail(email)
		pu, perr := pg.UserByEmail(email)
		if (berr == nil) != (perr == nil) {
			t.Errorf("UserByEmail(%s): embedded %v, postgresql %v", email, berr, perr)
		}
		same(t, "user "+email, bu, pu)
	}
	bs, _ := b.ConsoleSession(f.session)
	ps, err := pg.ConsoleSession(f.session)
	if err != nil {
		t.Errorf("console session: %v", err)
	}
	same(t, "console session", bs, ps)
	bsec, _ := b.Secret("jwt", 32)
	psec, err := pg.Secret("jwt", 32)
	if err != nil || !bytes.Equal(bsec, psec) {
		t.Errorf("secret jwt: %x, %v; want the embedded store's %x", psec, err, bsec)
	}
	if _, err := pg.CompanyDevice(f.deleted.CompanyID, f.deleted.Fingerprint); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted device: %v, want ErrNotFound", err)
	}

	c1 := f.companies[0]
	for _, uuid := range f.uuids {
		bm, _ := b.MessageByUUID(c1, uuid)
		pm, err := pg.MessageByUUID(c1, uuid)
		if err != nil {
			t.Errorf("message %s: %v", uuid, err)
		}
		same(t, "message "+uuid, bm, pm)
	}
	bo, _ := b.OptOuts(c1, "", 10)
	po, err := pg.OptOuts(c1, "", 10)
	if err != nil {
		t.Errorf("opt-outs: %v", err)
	}
	same(t, "opt-outs", bo, po)
	bu, _ := b.StorageUsed(c1, t0)
	pu, err := pg.StorageUsed(c1, t0)
	if err != nil || bu != pu || bu == 0 {
		t.Errorf("storage used: %d, %v; want the embedded store's %d", pu, err, bu)
	}
	from, _ := store.CalendarMonth(t0)
	bn, bd, _ := b.Usage(c1, from)
	pn, pd, err := pg.Usage(c1, from)
	if err != nil || bn != pn || bd != pd {
		t.Errorf("usage: %d messages, %d devices, %v; want %d and %d", pn, pd, err, bn, bd)
	}
	bdue, _, _ := b.NextDue()
	pdue, ok, err := pg.NextDue()
	if err != nil || !ok || !pdue.Equal(bdue) {
		t.Errorf("next due: %v, %t, %v; want %v", pdue, ok, err, bdue)
	}
	bp, _ := b.Pools(c1)
	pp, err := pg.Pools(c1)
	if err != nil {
		t.Errorf("pools: %v", err)
	}
	same(t, "pools", bp, pp)
	phoneA, _ := b.CompanyDevice(c1, "phone-a")
	bf, _ := b.DeviceFailures(c1, phoneA.ID)
	pf, err := pg.DeviceFailures(c1, phoneA.ID)
	if err != nil || len(pf) == 0 {
		t.Errorf("device failures: %v, %v", pf, err)
	}
	same(t, "device failures", bf, pf)
	bsim, _ := b.SIMUsages(c1, "phone-a", t0.Add(time.Minute))
	psim, err := pg.SIMUsages(c1, "phone-a", t0.Add(time.Minute))
	if err != nil {
		t.Errorf("SIM usages: %v", err)
	}
	same(t, "SIM usages", bsim, psim)
	bcf, _ := b.CarrierFailing(c1, t0.Add(2*time.Minute))
	pcf, err := pg.CarrierFailing(c1, t0.Add(2*time.Minute))
	if err != nil || len(pcf) == 0 {
		t.Errorf("carrier failing: %v, %v", pcf, err)
	}
	same(t, "carrier failing", bcf, pcf)
	// The pool passes over the failing SIM as the embedded store does, and
	// after the cool-down sends from the member the recipient stuck to.
	sticky := store.Message{UUID: "m-sticky", CompanyID: c1, Pool: "Sales", Channel: "sms", Phone: "+15550004444", Text: "again", Segments: 1}
	if _, _, err := pg.Enqueue(&sticky, store.IdempotencyKey{}, func() time.Time { return t0.Add(2 * time.Minute) }, nil, nil); !errors.As(err, new(*store.PoolUnavailableError)) {
		t.Errorf("a send through the copied pool while its SIM fails: %v, want a *PoolUnavailableError", err)
	}
	later := func() time.Time { return t0.Add(time.Minute + store.CarrierErrorCooldown) }
	if m, _, err := pg.Enqueue(&sticky, store.IdempotencyKey{}, later, nil, nil); err != nil || m.Device != "phone-a" || m.PoolID != f.pool {
		t.Errorf("a send through the copied pool: %+v, %v", m, err)
	}

	// The key's answer replays; a new send queues behind the copied one.
	retry := store.Message{UUID: "m-retry", CompanyID: c1, Device: "phone-a", Channel: "sms", Phone: "+15550001111", Text: "again", SIMSlot: "SIM1", Segments: 1}
	answer := func(m store.Message) (int, []byte) { return 202, []byte(m.UUID) }
	if _, prior, err := pg.Enqueue(&retry, f.idemKey, func() time.Time { return t0.Add(time.Minute) }, nil, answer); err != nil || prior == nil || string(prior.Body) != "m-queued" {
		t.Errorf("a retry with the copied key: %+v, %v; want the first answer", prior, err)
	}
	next := store.Message{UUID: "m-next", CompanyID: c1, Device: "phone-a", Channel: "sms", Phone: "+15550001111", Text: "next", SIMSlot: "SIM1", Segments: 1}
	if m, _, err := pg.Enqueue(&next, store.IdempotencyKey{}, func() time.Time { return t0.Add(time.Minute) }, nil, answer); err != nil || m.QueuePlace() <= f.queued.QueuePlace() || m.ID <= f.queued.ID {
		t.Errorf("a send after the copy: place %d, id %d, %v; want both above the copied send's %d and %d", m.QueuePlace(), m.ID, err, f.queued.QueuePlace(), f.queued.ID)
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
