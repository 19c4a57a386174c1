package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/store"
)

// TestLiveEventReachesATabOnAnotherNode: two nodes, each a broker on the
// bus as cmd/simrelay wires them (serve_live.go); a change committed on one
// reaches its company's tab on the other, and no other company's.
func TestLiveEventReachesATabOnAnotherNode(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	brokers := map[string]*Broker{}
	lives := map[string]*cluster.Live{}
	for _, node := range []string{"a", "b"} {
		bus, err := cluster.Connect(context.Background(), cluster.Config{URL: url, Node: node})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bus.Close)
		brokers[node] = NewBroker(StreamConfig{}, nil)
		l, err := cluster.StartLive(bus, brokers[node].Deliver, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		if err := bus.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		lives[node] = l
	}
	tab, err := brokers["b"].subscribe(7, 1, "s1")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := brokers["b"].subscribe(8, 2, "s2")
	local, _ := brokers["a"].subscribe(7, 3, "s3")

	company, body, err := brokers["a"].RenderLive(store.Message{ID: 42, CompanyID: 7, Direction: store.Outbound, UUID: "q-42", Status: store.MsgDelivered, Text: "line one\nline two"})
	if err != nil {
		t.Fatal(err)
	}
	if err := brokers["a"].Deliver(company, body); err != nil {
		t.Fatal(err)
	}
	lives["a"].Offer(company, body)
	for name, s := range map[string]*subscriber{"a's own tab": local, "b's tab": tab} {
		select {
		case got := <-s.events:
			if got.name != "message" || string(got.body) != string(body) || !strings.Contains(string(got.body), `"status":"delivered"`) {
				t.Fatalf("%s got %s, want %s", name, got, body)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never got the event", name)
		}
	}
	if len(other.events) != 0 || len(local.events) != 0 {
		t.Fatalf("events beyond the one change: company 8 got %d, a's tab %d more", len(other.events), len(local.events))
	}
}

func TestDeliverRefusesWhatWouldBreakAStream(t *testing.T) {
	t.Parallel()
	b := NewBroker(StreamConfig{}, nil)
	tab, _ := b.subscribe(1, 1, "s")
	for _, body := range []string{"{\"a\":1}\n\nevent: signedout", "{\"a\":\n1}", "not json", ""} {
		if err := b.Deliver(1, []byte(body)); err == nil {
			t.Errorf("Deliver took %q", body)
		}
	}
	if err := b.Deliver(0, []byte(`{}`)); err == nil {
		t.Error("Deliver took an event without a company")
	}
	if len(tab.events) != 0 {
		t.Fatalf("a refused body reached a tab")
	}
}

func TestResyncEndsEveryStreamOfTheNode(t *testing.T) {
	t.Parallel()
	b := NewBroker(StreamConfig{}, nil)
	one, _ := b.subscribe(1, 1, "s1")
	two, _ := b.subscribe(2, 2, "s2")
	b.Resync()
	for i, s := range []*subscriber{one, two} {
		select {
		case <-s.gone:
		default:
			t.Fatalf("stream %d still open after Resync", i+1)
		}
	}
	// Their slots are their handlers' to give back, as with any drop.
	if got := b.Streams(); got != 2 {
		t.Fatalf("streams before the handlers return: got %d, want 2", got)
	}
	b.Resync() // nothing left to end
}
