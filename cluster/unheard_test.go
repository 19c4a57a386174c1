package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A live node unheard on the bus is logged once it has been unheard for
// the grace (WARN, naming it), again at most hourly, and once all are
// heard again (INFO). A node unheard for less than the grace (one killed a
// moment ago, still live in the registry) and one heard again meanwhile
// are not reported.
func TestUnheardLogsSplitBus(t *testing.T) {
	var buf bytes.Buffer
	u := NewUnheard(10*time.Second, slog.New(slog.NewTextHandler(&buf, nil)))
	lines := func() []string {
		out := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if out[0] == "" {
			return nil
		}
		return out
	}
	start := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	live := []string{"b", "c", "d"}
	for s := time.Duration(0); s <= 8*time.Second; s += 2 * time.Second {
		u.Observe(at(s), live, []string{"b"})
	}
	u.Observe(at(9*time.Second), live, []string{"b", "c"}) // c heard again: its grace starts over
	if got := lines(); len(got) != 0 || u.Count() != 0 {
		t.Fatalf("nodes unheard for less than the grace: %q, count %d", got, u.Count())
	}
	u.Observe(at(10*time.Second), live, []string{"b"})
	u.Observe(at(12*time.Second), live, []string{"b"})
	got := lines()
	if len(got) != 1 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[0], "unheard=d ") || u.Count() != 1 {
		t.Fatalf("d unheard for the grace: %q, count %d; want one WARN naming d alone", got, u.Count())
	}
	u.Observe(at(20*time.Second), live, []string{"b"})
	u.Observe(at(22*time.Second), live, []string{"b"})
	// c's grace ran out too: the WARN that names it comes at once, not an
	// hour after d's, and once.
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], `unheard="c, d"`) || u.Count() != 2 {
		t.Fatalf("c unheard too: %q, count %d", got, u.Count())
	}
	u.Observe(at(time.Hour+20*time.Second), live, []string{"b"})
	if got := lines(); len(got) != 3 || !strings.Contains(got[2], "reported_for=1h0m10s") {
		t.Fatalf("an hour on: %q, want a reminder saying for how long", got)
	}
	n := len(lines())
	u.Observe(at(time.Hour+22*time.Second), []string{"b", "c"}, []string{"b", "c"}) // d stopped, c heard
	if got := lines(); len(got) != n+1 || !strings.Contains(got[n], "level=INFO") || u.Count() != 0 {
		t.Fatalf("all heard again: %q, want one INFO", got[n:])
	}
}
