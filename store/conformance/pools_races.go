package conformance

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Pool sends racing each other, or another company's.

// poolOfAnotherCompany: a send through a pool name only another company
// has is ErrPoolGone and stores nothing; two companies' pools of one name,
// sent through at once, each take only their own company's sends, on their
// own company's devices.
func poolOfAnotherCompany(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	da := Device(t, s, a.ID, fmt.Sprintf("fp-%d", unique()))
	db := Device(t, s, b.ID, fmt.Sprintf("fp-%d", unique()))
	putPool(t, s, a.ID, store.PoolInput{Name: "shared", Strategy: store.PoolRoundRobin, Members: members(da.Fingerprint, "SIM1")})
	xa, xb := poolSender{t, s, a.ID}, poolSender{t, s, b.ID}
	m := xb.msg("+15550000001")
	m.Pool = "shared"
	if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return T0 }, nil, nil); !errors.Is(err, store.ErrPoolGone) {
		t.Fatalf("a send through another company's pool: %v, want ErrPoolGone", err)
	}
	if got, err := s.MessageByUUID(b.ID, m.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused send is stored: %+v (%v)", got, err)
	}
	if got, err := s.MessageByUUID(a.ID, m.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused send is stored as the pool's company's: %+v (%v)", got, err)
	}
	putPool(t, s, b.ID, store.PoolInput{Name: "shared", Strategy: store.PoolRoundRobin, Members: members(db.Fingerprint, "SIM1")})
	const n = 8
	var wg sync.WaitGroup
	for _, c := range []struct {
		x   poolSender
		dev store.Device
	}{{xa, da}, {xb, db}} {
		for i := range n {
			wg.Go(func() {
				out, err := c.x.pool("shared", fmt.Sprintf("+1555000%04d", i), T0)
				if err != nil {
					t.Errorf("company %d's send %d through its pool: %v", c.x.company, i, err)
					return
				}
				if out.CompanyID != c.x.company || out.DeviceID != c.dev.ID || out.Device != c.dev.Fingerprint {
					t.Errorf("company %d's send went to device %d (%s) of company %d, want its own %d", c.x.company, out.DeviceID, out.Device, out.CompanyID, c.dev.ID)
				}
			})
		}
	}
	wg.Wait()
}

// poolIdempotencyRace: sends through a pool racing on one key store one
// message, on one member; every caller gets its answer; the member's SIM
// counts it once.
func poolIdempotencyRace(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	d1, d2 := Device(t, s, a.ID, fmt.Sprintf("fp-%d", unique())), Device(t, s, a.ID, fmt.Sprintf("fp-%d", unique()))
	putPool(t, s, a.ID, store.PoolInput{Name: "p", Strategy: store.PoolRoundRobin, Members: members(d1.Fingerprint, "SIM1", d2.Fingerprint, "SIM1")})
	for _, d := range []store.Device{d1, d2} {
		if _, err := s.SetSIMCaps(a.ID, d.Fingerprint, map[string]store.SIMCaps{"SIM1": {PerDay: 1000}}, T0); err != nil {
			t.Fatal(err)
		}
	}
	x := poolSender{t, s, a.ID}
	const n = 16
	key := store.IdempotencyKey{Key: "pool-race", Route: "/chat/send", Digest: "d"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stored []store.Message
	var answers []string
	for i := range n {
		wg.Go(func() {
			m := x.msg(fmt.Sprintf("+1555000%04d", i))
			m.Pool = "p"
			out, prior, err := s.Enqueue(&m, key, func() time.Time { return T0 }, nil, func(m store.Message) (int, []byte) { return 202, []byte(m.UUID) })
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("send %d: %v", i, err)
			case prior != nil:
				answers = append(answers, string(prior.Body))
			default:
				stored = append(stored, out)
				answers = append(answers, out.UUID)
			}
		})
	}
	wg.Wait()
	if len(stored) != 1 || len(answers) != n {
		t.Fatalf("%d stored, %d answered of %d sends racing on one key through a pool, want 1 and %d", len(stored), len(answers), n, n)
	}
	for i, got := range answers {
		if got != stored[0].UUID {
			t.Fatalf("caller %d got %q, want %q", i, got, stored[0].UUID)
		}
	}
	var day int64
	for _, d := range []store.Device{d1, d2} {
		us, err := s.SIMUsages(a.ID, d.Fingerprint, T0)
		if err != nil {
			t.Fatal(err)
		}
		day += us[0].Day
	}
	if day != 1 {
		t.Fatalf("the pool's SIMs counted %d sends today, want 1", day)
	}
}
