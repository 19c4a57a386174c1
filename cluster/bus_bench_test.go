package cluster_test

import (
	"context"
	"testing"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/internal/natstest"
)

// BenchmarkPublish is what one signal costs the path that publishes it (a
// send's kick, a link's registration, a live event): go test -bench
// Publish ./cluster/. A second node hears the subject, as in a cluster.
// Every few hundred signals a round trip (Ready) waits until the server
// has them, so that none is dropped for a full queue: "caller" times the
// publishes alone, "server" and "parallel" the round trips too (what the
// bus carries a second).
func BenchmarkPublish(b *testing.B) {
	url := natstest.Start(b)
	pub, sub := connectB(b, url, "a"), connectB(b, url, "b")
	if err := sub.Subscribe("bench", func(cluster.Message) {}); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 200)
	ready := func(b *testing.B) {
		if err := pub.Ready(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	const every = 256
	b.Run("caller", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			pub.Publish("bench", body)
			if i++; i%every == 0 {
				b.StopTimer()
				ready(b)
				b.StartTimer()
			}
		}
	})
	b.Run("server", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			pub.Publish("bench", body)
			if i++; i%every == 0 {
				ready(b)
			}
		}
		ready(b)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(p *testing.PB) {
			i := 0
			for p.Next() {
				pub.Publish("bench", body)
				if i++; i%every == 0 {
					ready(b)
				}
			}
		})
		ready(b)
	})
}

func connectB(tb testing.TB, url, node string) *cluster.Bus {
	tb.Helper()
	b, err := cluster.Connect(context.Background(), cluster.Config{URL: url, Node: node})
	if err != nil {
		tb.Fatalf("connect %s: %v", node, err)
	}
	tb.Cleanup(b.Close)
	return b
}
