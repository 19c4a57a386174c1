package cluster

import (
	"context"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store/conformance"
	"github.com/simrelay/simrelay/store/postgres"
)

// Presence, asked of node a for a page of devices, answers what Online and
// LastSeen answer of each: a device linked on live node b online since b's
// last beat; one linked on dead node c, one never linked and an unknown
// fingerprint offline; and nothing when the database does not answer.
func TestPresenceAcrossNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	st, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const live = 10 * time.Second
	for _, n := range []string{"a", "b", "c"} {
		if err := st.RegisterNode(postgres.Node{Name: n, Instance: n, Bus: true}, live); err != nil {
			t.Fatal(err)
		}
	}
	bus, err := Connect(ctx, Config{URL: natstest.Start(t), Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	log := slog.New(slog.DiscardHandler)
	hub := gateway.New(gateway.Config{}, device.New(device.Config{}, st, time.Now), sms.New(sms.Config{}, st, log, time.Now), log, time.Now)
	g, err := NewGateway(GatewayConfig{Bus: bus, Store: st, Hub: hub, Live: live, SweepEvery: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hub.SetEpochs(g)

	c, _ := conformance.Company(t, st)
	other, _ := conformance.Company(t, st)
	link := func(companyID uint64, fp, node string) {
		d := conformance.Device(t, st, companyID, fp)
		if node == "" {
			return
		}
		if _, err := st.ClaimLink(d.ID, node); err != nil {
			t.Fatal(err)
		}
	}
	link(c.ID, "pr-on-b", "b")
	link(other.ID, "pr-other-on-b", "b")
	link(c.ID, "pr-on-c", "c")
	link(c.ID, "pr-never", "")
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'c'`); err != nil {
		t.Fatal(err)
	}

	page := []string{"pr-on-b", "pr-other-on-b", "pr-on-c", "pr-never", "pr-unknown"}
	got := g.Presence(page)
	want := map[string]time.Time{}
	for _, fp := range page {
		if g.Online(fp) {
			want[fp] = g.LastSeen(fp)
		}
	}
	if len(want) != 2 || want["pr-on-b"].IsZero() {
		t.Fatalf("Online and LastSeen, device by device: %v; want the two devices on b online", want)
	}
	if !maps.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("Presence of the page: %v; want what Online and LastSeen answer of each, %v", got, want)
	}
	if got := g.Presence(nil); len(got) != 0 {
		t.Fatalf("Presence of no devices: %v, want none", got)
	}

	// The database gone: nobody is online, as Online says then.
	_ = st.Close()
	if got := g.Presence(page); len(got) != 0 {
		t.Fatalf("Presence without the database: %v, want none", got)
	}
}
