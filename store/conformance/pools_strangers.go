package conformance

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

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
