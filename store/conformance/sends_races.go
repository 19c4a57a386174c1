package conformance

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/simrelay/simrelay/store"
)

// Sends racing each other, as a cluster's nodes (or one node's requests)
// make them: what one send holds in its transaction must hold when many
// run at once. Every assertion is about what was stored and counted, never
// about how long it took; each race is bounded in its goroutines and rounds.

// keyRace is the outcome of one round of sends racing on one key.
type keyRace struct {
	stored  []store.Message
	answers []string // every caller's answer: the stored message's, or the replayed one
	errs    []error
}

// raceKey sends n messages at once through x with one idempotency key.
func raceKey(x *sender, n int, key store.IdempotencyKey, round int) keyRace {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var r keyRace
	for i := range n {
		wg.Go(func() {
			out, prior, err := x.send(x.msg("+15551230001", fmt.Sprintf("round %d try %d", round, i)), key)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				r.errs = append(r.errs, err)
			case prior != nil:
				r.answers = append(r.answers, string(prior.Body))
			default:
				r.stored = append(r.stored, out)
				r.answers = append(r.answers, out.UUID)
			}
		})
	}
	wg.Wait()
	return r
}

// sendIdempotencyRounds: rounds of 16 sends racing on one key each store
// exactly one message a round; every caller gets that message's answer;
// the plan's usage, the day's bytes and the SIM's counts count each stored
// message once. The plan allows as many messages as there are rounds, so
// the last round's replays come back with the plan full, and a new key
// after the rounds is refused.
func sendIdempotencyRounds(t *testing.T, s SendsStore) {
	const rounds, n = 4, 16
	s.SetPlans(messagePlan(rounds))
	x := newSender(t, s)
	// Caps far above the race, so that the SIM's use is counted.
	if _, err := s.SetSIMCaps(x.c.ID, x.dev.Fingerprint, map[string]store.SIMCaps{"SIM1": {PerDay: 1000, PerMonth: 1000, RecipientsPerDay: 1000}}, T0); err != nil {
		t.Fatal(err)
	}
	base, err := s.StorageUsed(x.c.ID, T0)
	if err != nil {
		t.Fatal(err)
	}
	var cost int64
	for round := range rounds {
		key := store.IdempotencyKey{Key: fmt.Sprint("rounds-", round), Route: "/chat/send", Digest: "d"}
		r := raceKey(x, n, key, round)
		if len(r.errs) > 0 {
			t.Fatalf("round %d: %d of %d racing sends failed, the first: %v", round, len(r.errs), n, r.errs[0])
		}
		if len(r.stored) != 1 {
			t.Fatalf("round %d: %d messages stored by %d sends racing on one key, want 1", round, len(r.stored), n)
		}
		won := r.stored[0]
		for i, a := range r.answers {
			if a != won.UUID {
				t.Fatalf("round %d: caller %d got the answer %q, want %q (the stored message's)", round, i, a, won.UUID)
			}
		}
		if got := x.stored(won.UUID); got.ID != won.ID || got.Text != won.Text {
			t.Fatalf("round %d: stored %+v, want the winner %+v", round, got, won)
		}
		cost += store.MessageCost(won)
		if u := x.usage(); u != int64(round+1) {
			t.Fatalf("round %d: the plan's usage is %d, want %d (one message a round)", round, u, round+1)
		}
		if used, err := s.StorageUsed(x.c.ID, T0); err != nil || used != base+cost {
			t.Fatalf("round %d: storage used %d (%v), want %d (each stored message once)", round, used, err, base+cost)
		}
		us, err := s.SIMUsages(x.c.ID, x.dev.Fingerprint, T0)
		if err != nil || len(us) == 0 || us[0].Slot != "SIM1" || us[0].Day != int64(round+1) || us[0].Month != int64(round+1) || us[0].Recipients != 1 {
			t.Fatalf("round %d: the SIM's use %+v (%v), want %d today and this month, 1 recipient", round, us, err, round+1)
		}
	}
	if _, _, err := x.send(x.msg("+15551230001", "past the plan"), store.IdempotencyKey{Key: "new", Route: "/chat/send"}); !errors.Is(err, store.ErrPlanLimit) {
		t.Fatalf("a new key with the plan full: %v, want the plan's refusal", err)
	}
	if _, prior, err := x.send(x.msg("+15551230001", "again"), store.IdempotencyKey{Key: "rounds-0", Route: "/chat/send", Digest: "d"}); err != nil || prior == nil {
		t.Fatalf("a retry of the first round's key with the plan full: prior %+v (%v), want its answer", prior, err)
	}
}

// sendSIMCapRace: sends racing for a SIM's last messages of the day are
// counted exactly: as many stored as the cap allows, the rest refused with
// the cap's error.
func sendSIMCapRace(t *testing.T, s SendsStore) {
	const limit, senders = 5, 16
	x := newSender(t, s)
	if _, err := s.SetSIMCaps(x.c.ID, x.dev.Fingerprint, map[string]store.SIMCaps{"SIM1": {PerDay: limit}}, T0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted, refused int
	for i := range senders {
		wg.Go(func() {
			_, _, err := x.send(x.msg(fmt.Sprintf("+1555123%04d", i), "race"), store.IdempotencyKey{})
			var ce *store.SIMCappedError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.As(err, &ce) && ce.What == store.CapPerDay && ce.Limit == limit:
				refused++
			default:
				t.Errorf("send %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if accepted != limit || refused != senders-limit {
		t.Fatalf("%d accepted, %d refused of %d sends racing for a SIM's cap of %d", accepted, refused, senders, limit)
	}
	if us, err := s.SIMUsages(x.c.ID, x.dev.Fingerprint, T0); err != nil || us[0].Day != limit {
		t.Fatalf("the SIM's use: %+v (%v), want %d today", us, err, limit)
	}
	if n := x.usage(); n != limit {
		t.Fatalf("usage: %d, want %d", n, limit)
	}
}

// sendIdempotencyAcrossCompanies: two companies racing on the same key each
// store their own message and replay only their own answer.
func sendIdempotencyAcrossCompanies(t *testing.T, s SendsStore) {
	x, y := newSender(t, s), newSender(t, s)
	const n = 8
	key := store.IdempotencyKey{Key: "shared", Route: "/chat/send", Digest: "d"}
	var rx, ry keyRace
	var wg sync.WaitGroup
	wg.Go(func() { rx = raceKey(x, n, key, 0) })
	wg.Go(func() { ry = raceKey(y, n, key, 0) })
	wg.Wait()
	for _, c := range []struct {
		name string
		x    *sender
		r    keyRace
	}{{"the first company", x, rx}, {"the second company", y, ry}} {
		if len(c.r.errs) > 0 || len(c.r.stored) != 1 {
			t.Fatalf("%s: %d stored, errors %v, want 1 stored and none", c.name, len(c.r.stored), c.r.errs)
		}
		for _, a := range c.r.answers {
			if a != c.r.stored[0].UUID {
				t.Fatalf("%s got the answer %q, want its own %q", c.name, a, c.r.stored[0].UUID)
			}
		}
		if got := c.x.stored(c.r.stored[0].UUID); got.CompanyID != c.x.c.ID {
			t.Fatalf("%s's message is stored as company %d's", c.name, got.CompanyID)
		}
		if u := c.x.usage(); u != 1 {
			t.Fatalf("%s's usage: %d, want 1", c.name, u)
		}
	}
	if rx.stored[0].UUID == ry.stored[0].UUID {
		t.Fatal("two companies share one message")
	}
}

// sendPlanLimitAcrossDevices: sends racing for the plan's last messages
// through several devices of one company (each device its own lock) are
// counted exactly: as many stored as the plan allows, the rest refused with
// the plan's error, and nothing stored for a refusal.
func sendPlanLimitAcrossDevices(t *testing.T, s SendsStore) {
	const limit, devices, senders = 7, 4, 32
	s.SetPlans(messagePlan(limit))
	x := newSender(t, s)
	xs := []*sender{x}
	for range devices - 1 {
		xs = append(xs, &sender{t: t, s: s, c: x.c, dev: Device(t, s, x.c.ID, fmt.Sprintf("fp-%d", unique())), at: T0})
	}
	base, _ := s.StorageUsed(x.c.ID, T0)
	accepted, refused := raceSends(t, senders, func(i int) *sender { return xs[i%devices] })
	if accepted != limit || refused != senders-limit {
		t.Fatalf("%d accepted, %d refused of %d sends racing across %d devices, want exactly %d accepted",
			accepted, refused, senders, devices, limit)
	}
	if n := x.usage(); n != limit {
		t.Fatalf("usage: %d, want %d", n, limit)
	}
	// The race's texts are "race 0" to "race 31": a stored message costs
	// one of two sizes, and a refused one nothing.
	lo, hi := store.MessageCost(x.msg("+15551230001", "race 0")), store.MessageCost(x.msg("+15551230001", "race 10"))
	if used, err := s.StorageUsed(x.c.ID, T0); err != nil || used-base < limit*lo || used-base > limit*hi {
		t.Fatalf("storage counted %d bytes (%v) for %d messages of %d or %d bytes", used-base, err, limit, lo, hi)
	}
}

// sendBudgetRace: sends racing for the last of the day's budget count
// exactly what they stored, and every refusal is the budget's. The embedded
// store admits exactly the budget; PostgreSQL reads the day's use unlocked
// by design and may admit the sends in flight at once (store/postgres/doc.go,
// docs/cluster.md), never counting one twice or losing one.
func sendBudgetRace(t *testing.T, s SendsStore) {
	probe := store.Message{Phone: budgetPhone, Text: strings.Repeat("x", budgetTextBytes)}
	cost := store.MessageCost(probe)
	x := newSender(t, s)
	x.at = T0.AddDate(0, 0, 3) // a day of its own: the fixtures' pairing code was charged on T0's
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted, refused int
	for range n {
		wg.Go(func() {
			_, _, err := x.send(x.msg(probe.Phone, probe.Text), store.IdempotencyKey{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, store.ErrStorageBudget):
				refused++
			default:
				t.Errorf("a racing send: %v", err)
			}
		})
	}
	wg.Wait()
	if accepted+refused != n || accepted < 2 {
		t.Fatalf("%d accepted, %d refused of %d, want at least the budget's 2 accepted and the rest refused", accepted, refused, n)
	}
	if used, err := s.StorageUsed(x.c.ID, x.at); err != nil || used != int64(accepted)*cost {
		t.Fatalf("storage used %d (%v), want %d for the %d stored", used, err, int64(accepted)*cost, accepted)
	}
	if _, _, err := x.send(x.msg(probe.Phone, probe.Text), store.IdempotencyKey{}); !errors.Is(err, store.ErrStorageBudget) {
		t.Fatalf("a send after the race: %v, want the budget's refusal", err)
	}
}
