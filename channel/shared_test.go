package channel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
	"github.com/simrelay/simrelay/store/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A WhatsApp number's caps hold with its sends spread over two nodes (two
// services, each with its own pool on one database): as many sends pass as
// one node lets pass, however they race, and the next is refused on either
// node with the Retry-After one node gives.
func TestSharedCapsHoldAcrossNodes(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	url := pgtest.URL(t)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var nodes []*channel.Service
	var stores []*postgres.Store
	for i := range 2 {
		st, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		svc, err := channel.New(channel.Config{Shared: true}, st, slog.New(slog.DiscardHandler), clock, rand.NewPCG(1, uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		nodes, stores = append(nodes, svc), append(stores, st)
	}
	c, _ := conformance.Company(t, stores[0])
	d := conformance.Device(t, stores[0], c.ID, "fp-agent")
	// Announced a month ago: past its warm-up, the number takes 8 a minute.
	nums, err := stores[0].AnnounceNumbers(c.ID, d.ID, channel.WhatsApp, []string{"+15550001111"}, now.AddDate(0, -1, 0), 0)
	if err != nil || len(nums) != 1 {
		t.Fatalf("announce: %+v %v", nums, err)
	}
	send := func(node int, text string) error {
		_, _, err := nodes[node].Send(context.Background(), channel.SendInput{CompanyID: c.ID, Channel: channel.WhatsApp, NumberID: nums[0].PublicID,
			To: "+15557654321", Content: text}, func(store.Message) (int, []byte) { return 202, nil })
		return err
	}
	const senders = 24
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for i := range senders {
		wg.Go(func() {
			err := send(i%2, fmt.Sprint("race ", i))
			var pe *problem.Error
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.As(err, &pe) && pe.Code == problem.NumberCapped:
			default:
				t.Errorf("send %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if accepted != pacing.DefaultWhatsAppPerMinute {
		t.Fatalf("%d of %d sends racing over two nodes accepted, want the minute's cap %d", accepted, senders, pacing.DefaultWhatsAppPerMinute)
	}
	// All sends were made at one instant, at the start of a second: the
	// minute frees a minute after that second's end, 61 s later.
	for node := range 2 {
		var pe *problem.Error
		if err := send(node, "over"); !errors.As(err, &pe) || pe.Code != problem.NumberCapped || pe.RetryAfter != 61 {
			t.Errorf("node %d over the cap: %v, want number_capped with Retry-After 61", node, err)
		}
	}
	now = now.Add(time.Minute + time.Second)
	if err := send(1, "next minute"); err != nil {
		t.Errorf("a send on the next minute: %v", err)
	}
}
