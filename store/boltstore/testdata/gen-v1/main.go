//go:build ignore

// Command gen-v1 writes store/boltstore/testdata/v1/simrelay.db: a small store in
// schema version 1, the layout whose per-device records were keyed by the
// device fingerprint, in the state that let one company see another's
// history. migrate_v1_test.go opens a copy of it with the current code.
//
// It only builds against a tree whose store is at schema version 1 (commit
// fb15f35 or earlier), so it is excluded from every build. To write the file
// again:
//
//	repo=$PWD   # the repository's root
//	git worktree add --detach /tmp/old fb15f35
//	mkdir -p /tmp/old/store/boltstore/testdata/gen-v1
//	cp store/boltstore/testdata/gen-v1/main.go /tmp/old/store/boltstore/testdata/gen-v1/
//	(cd /tmp/old && go run ./store/boltstore/testdata/gen-v1/main.go -out "$repo/store/boltstore/testdata/v1")
//	git worktree remove --force /tmp/old
//
// Everything is fixed (times, UUIDs, token hashes), so the file describes
// the same state each time it is written.
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// The names migrate_v1_test.go looks for.
const (
	shared = "shared-phone" // paired by company A, deleted, then paired by company B
	keepA  = "a-keep"       // company A's phone that stays
	peer   = "+15550000001" // both companies' phones talk with this number
	peer2  = "+15550000002"
)

var base = time.Date(2026, 1, 10, 10, 0, 0, 0, time.UTC)

func main() {
	out := flag.String("out", "", "directory to write simrelay.db into (emptied first)")
	flag.Parse()
	if *out == "" {
		log.Fatal("gen-v1: -out is required")
	}
	_ = os.Remove(filepath.Join(*out, store.FileName))
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	st, err := store.Open(*out, store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if v, _ := st.Version(); v != 1 {
		log.Fatalf("gen-v1: this tree writes schema version %d; run it against a version 1 tree", v)
	}
	g := &gen{st: st, clock: base}
	g.run()
	if err := st.Close(); err != nil {
		log.Fatal(err)
	}
	// Compact: a fresh copy holds only live pages, which keeps the fixture small.
	compact(filepath.Join(*out, store.FileName))
	fmt.Println("wrote", filepath.Join(*out, store.FileName))
}

type gen struct {
	st    *store.Store
	clock time.Time
	n     int
}

func (g *gen) now() time.Time {
	g.clock = g.clock.Add(time.Second)
	return g.clock
}

func (g *gen) uuid() string {
	g.n++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", g.n)
}

func hash(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func (g *gen) company(name, email string) (uint64, uint64) {
	c := store.Company{Name: name, Phone: "+15559990000", CreatedAt: g.now(), APIKeyHash: hash("key-" + name), APIKeyCreatedAt: g.clock}
	u := store.User{FirstName: "Admin", LastName: name, Email: email, EmailVerified: true, CreatedAt: g.clock}
	must(g.st.CreateCompany(&c, &u))
	return c.ID, u.ID
}

func (g *gen) pair(companyID, userID uint64, fp string) {
	code := hash("pair-" + fp + g.uuid())
	must(g.st.PutPairing(code, store.Pairing{CompanyID: companyID, UserID: userID, ExpiresAt: g.clock.Add(time.Hour)}))
	_, _, _, err := g.st.RegisterDevice(code, g.now(), fp, func(p store.Pairing, old *store.Device) (store.Device, error) {
		return store.Device{UserID: p.UserID, Name: "phone " + fp, Status: store.DeviceActive, SelectedSIM: "BOTH",
			SIMs: []store.SIM{{Slot: "SIM1", Carrier: "Carrier", PhoneNumber: "+15558880000"}}, AppVersion: "1.0.0",
			TokenHash: hash("token-" + fp + g.uuid()), CreatedAt: g.clock}, nil
	})
	must(err)
}

func (g *gen) send(companyID, userID uint64, fp, to, text string) string {
	m := store.Message{UUID: g.uuid(), CompanyID: companyID, UserID: userID, Device: fp, Channel: "sms", Phone: to,
		Text: text, SIMSlot: "SIM1", Segments: 1, ExpiresAt: g.clock.Add(24 * time.Hour)}
	_, _, err := g.st.Enqueue(&m, "", g.now, nil, func(store.Message) (int, []byte) { return 200, nil })
	must(err)
	return m.UUID
}

func (g *gen) move(fp, uuid, status, errText string) {
	_, err := g.st.Transition(fp, uuid, status, errText, "", g.now())
	must(err)
}

func (g *gen) inbound(fp, from, clientID, text string) {
	m := store.Message{UUID: g.uuid(), Device: fp, Channel: "sms", Phone: from, Text: text, SIMSlot: "SIM1",
		Segments: 1, ClientID: clientID, ReceivedAt: g.clock.Format("2006-01-02T15:04:05.000Z")}
	_, _, err := g.st.StoreInbound(&m, g.now, func(tx *bolt.Tx, m store.Message) error {
		_, err := store.AddWebhookDeliveries(tx, m.CompanyID, func(set store.WebhookSet) ([]store.WebhookDelivery, error) {
			var out []store.WebhookDelivery
			for _, e := range set.Entries {
				out = append(out, store.WebhookDelivery{UUID: g.uuid(), EventID: m.UUID, EventType: "sms.received", WebhookID: e.ID,
					Body: []byte(`{"id":"` + m.UUID + `","type":"sms.received"}`), CreatedAt: m.CreatedAt, NextAttemptAt: m.CreatedAt})
			}
			return out, nil
		})
		return err
	})
	must(err)
}

func (g *gen) run() {
	a, adminA := g.company("Alpha", "admin@alpha.example")
	b, adminB := g.company("Beta", "admin@beta.example")
	must(g.st.CreateUser(&store.User{CompanyID: a, FirstName: "Member", LastName: "Alpha", Email: "member@alpha.example", Role: store.RoleMember, CreatedAt: g.now()}))
	_, err := g.st.UpdateWebhookSet(a, g.now(), func(set *store.WebhookSet) error {
		set.Secret, set.SecretCreatedAt = "whsec_alpha", g.clock
		set.Entries = []store.WebhookEntry{{URL: "https://hooks.alpha.example/sms", Active: true},
			{URL: "https://hooks.alpha.example/shared", Active: true, Devices: []string{shared}, SIMs: []int{0}}}
		return nil
	})
	must(err)
	_, err = g.st.UpdateWebhookSet(b, g.now(), func(set *store.WebhookSet) error {
		set.Secret, set.SecretCreatedAt = "whsec_beta", g.clock
		set.Entries = []store.WebhookEntry{{URL: "https://hooks.beta.example/in", Active: true, Channels: []string{"sms"}}}
		return nil
	})
	must(err)

	// Company A: two phones; the shared one sees every outbound status and
	// two inbound messages, then is deleted with one job still queued.
	g.pair(a, adminA, shared)
	g.pair(a, adminA, keepA)
	sent := g.send(a, adminA, shared, peer, "A: sent")
	g.move(shared, sent, store.MsgSending, "")
	g.move(shared, sent, store.MsgSent, "")
	delivered := g.send(a, adminA, shared, peer, "A: delivered")
	g.move(shared, delivered, store.MsgSending, "")
	g.move(shared, delivered, store.MsgDelivered, "")
	failed := g.send(a, adminA, shared, peer2, "A: failed")
	g.move(shared, failed, store.MsgSending, "")
	g.move(shared, failed, store.MsgFailed, "no_service")
	g.inbound(shared, peer, "client-1", "A: inbound one")
	g.inbound(shared, peer2, "client-2", "A: inbound two")
	g.send(a, adminA, shared, peer, "A: queued when deleted")
	acked := g.send(a, adminA, shared, peer, "A: sending when deleted")
	g.move(shared, acked, store.MsgSending, "")

	// A's other phone keeps a queued, a sending and a finished job, and an
	// inbound message whose client_id the shared phone also used.
	k1 := g.send(a, adminA, keepA, peer, "A keep: sent")
	g.move(keepA, k1, store.MsgSending, "")
	g.move(keepA, k1, store.MsgSent, "")
	k2 := g.send(a, adminA, keepA, peer, "A keep: sending")
	g.move(keepA, k2, store.MsgSending, "")
	g.send(a, adminA, keepA, peer2, "A keep: queued")
	g.inbound(keepA, peer, "client-1", "A keep: inbound")

	_, err = g.st.DeleteDevice(shared, g.now())
	must(err)

	// Company B pairs the same handset: under schema 1 it now sees A's
	// history of that fingerprint.
	g.pair(b, adminB, shared)
	g.inbound(shared, peer, "client-9", "B: inbound")
	g.send(b, adminB, shared, peer, "B: queued")
	bs := g.send(b, adminB, shared, peer2, "B: sending")
	g.move(shared, bs, store.MsgSending, "")
}

// compact rewrites the file with only its live pages.
func compact(path string) {
	src, err := bolt.Open(path, 0o600, nil)
	must(err)
	tmp := path + ".compact"
	dst, err := bolt.Open(tmp, 0o600, nil)
	must(err)
	must(bolt.Compact(dst, src, 0))
	must(src.Close())
	must(dst.Close())
	must(os.Rename(tmp, path))
}
