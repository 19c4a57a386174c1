package cluster

import (
	"maps"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store/conformance"
)

// Presence, asked of node a for a page of devices, answers what Online and
// LastSeen answer of each: a device linked on live node b online since b's
// last beat; one linked on dead node c, one never linked and an unknown
// fingerprint offline; and nothing when the database does not answer.
func TestPresenceAcrossNodes(t *testing.T) {
	t.Parallel()
	const live = 10 * time.Second
	st, g, url := gatewayOnNodes(t, live, time.Hour, "a", "b", "c")

	c, _ := conformance.Company(t, st)
	other, _ := conformance.Company(t, st)
	page := map[string]uint64{"pr-unknown": 1 << 40}
	link := func(companyID uint64, fp, node string) {
		d := conformance.Device(t, st, companyID, fp)
		page[fp] = d.ID
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
	sqlExec(t, url)(`UPDATE cluster_nodes SET seen_at = now() - interval '1 minute' WHERE name = 'c'`)

	got := g.Presence(page)
	want := map[string]time.Time{}
	for fp, id := range page {
		if g.Online(fp, id) {
			want[fp] = g.LastSeen(fp, id)
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
