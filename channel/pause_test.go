package channel_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
	"github.com/simrelay/simrelay/store/postgres"
)

// kicks records the devices a service kicks.
type kicks struct {
	mu   sync.Mutex
	devs []uint64
}

func (k *kicks) Kick(_ string, id uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.devs = append(k.devs, id)
}

func (k *kicks) Release(fp string, id uint64) { k.Kick(fp, id) }

func (k *kicks) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.devs)
}

// A number paused on one node is held on the node that holds its agent's
// link (two services, each with its own pool on one database): that node
// reads none of its jobs, and one it read just before the pause is not
// ready to go, without starting the number's gap. Set active again on the
// first node, which kicks the agent's device (the bus carries the kick to
// the node holding the link), the jobs go, in order, at once.
func TestPauseHoldsAcrossNodes(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	url := pgtest.URL(t)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var nodes []*channel.Service
	var stores []*postgres.Store
	var kicked []*kicks
	for i := range 2 {
		st, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		svc, err := channel.New(channel.Config{Shared: true}, st, slog.New(slog.DiscardHandler), clock, rand.NewPCG(2, uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		k := &kicks{}
		svc.SetDispatcher(k)
		nodes, stores, kicked = append(nodes, svc), append(stores, st), append(kicked, k)
	}
	c, _ := conformance.Company(t, stores[0])
	d := conformance.Device(t, stores[0], c.ID, "fp-paused-agent")
	nums, err := stores[0].AnnounceNumbers(c.ID, d.ID, channel.WhatsApp, []string{"+15550001111"}, now.AddDate(0, -1, 0), 0)
	if err != nil || len(nums) != 1 {
		t.Fatalf("announce: %+v %v", nums, err)
	}
	n := nums[0]
	var sent []string
	for i := range 3 {
		m, _, err := nodes[0].Send(context.Background(), channel.SendInput{CompanyID: c.ID, Channel: channel.WhatsApp, NumberID: n.PublicID,
			To: "+15557654321", Content: "held"}, func(store.Message) (int, []byte) { return 202, nil })
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		sent = append(sent, m.UUID)
	}
	holder := nodes[1] // the node holding the agent's link
	jobs, err := holder.Pending(context.Background(), d, n.ID, 0, 10)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("before the pause: %d jobs (%v), want 3", len(jobs), err)
	}
	status := func(s string) {
		t.Helper()
		if _, err := nodes[0].Update(context.Background(), c.ID, channel.WhatsApp, n.PublicID, channel.Patch{Status: &s}); err != nil {
			t.Fatalf("set %s: %v", s, err)
		}
	}
	before := kicked[0].count()
	status(store.NumberPaused)
	if kicked[0].count() != before {
		t.Errorf("a pause kicked the agent: nothing is there to send")
	}
	// The job read just before the pause is not let go, and starts no gap.
	for range 2 {
		if _, wait, err := holder.Ready(d, n.ID); wait <= 0 || err != nil {
			t.Fatalf("the paused number's job read before the pause: ready (wait %v, %v), want held", wait, err)
		}
	}
	if jobs, err := holder.Pending(context.Background(), d, n.ID, 0, 10); err != nil || len(jobs) != 0 {
		t.Fatalf("paused on the other node: %d jobs (%v), want none", len(jobs), err)
	}
	status(store.NumberActive)
	if kicked[0].count() != before+1 || kicked[0].devs[before] != d.ID {
		t.Fatalf("the resume kicked %v, want the agent's device %d", kicked[0].devs[before:], d.ID)
	}
	jobs, err = holder.Pending(context.Background(), d, n.ID, 0, 10)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("resumed: %d jobs (%v), want 3", len(jobs), err)
	}
	for i, j := range jobs {
		if j.Send == nil || j.Send.ID != sent[i] {
			t.Fatalf("resumed, job %d: %+v, want %s: in the order sent", i, j.Send, sent[i])
		}
	}
	if _, wait, err := holder.Ready(d, n.ID); wait != 0 || err != nil {
		t.Fatalf("resumed: the first job waits %v (%v), want none (the pause started no gap)", wait, err)
	}
	if _, wait, err := holder.Ready(d, n.ID); wait <= 0 || err != nil {
		t.Fatalf("the second job right after the first: ready (%v), want it to wait its gap", err)
	}
}
