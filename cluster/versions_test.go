package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Other builds beside this node's are logged once when they appear (WARN,
// naming the nodes and their versions), again at most hourly while they
// stay, and once when they are gone (INFO, saying for how long); nodes of
// this node's build alone log nothing.
func TestVersionsLogChanges(t *testing.T) {
	var buf bytes.Buffer
	v := NewVersions("v1.4.0", slog.New(slog.NewTextHandler(&buf, nil)))
	lines := func() []string {
		out := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if out[0] == "" {
			return nil
		}
		return out
	}
	start := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	same := []NodeVersion{{"a", "v1.4.0"}, {"b", "v1.4.0"}}
	mixed := []NodeVersion{{"a", "v1.4.0"}, {"b", "v1.3.2"}, {"c", ""}}
	v.Observe(start, same)
	if got := lines(); len(got) != 0 {
		t.Fatalf("one version logged: %q", got)
	}
	for i := range 5 { // beats 2 s apart
		v.Observe(start.Add(time.Duration(i)*2*time.Second), mixed)
	}
	got := lines()
	if len(got) != 1 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[0], `others="b (v1.3.2), c (unknown)"`) || !strings.Contains(got[0], "version=v1.4.0") || strings.Contains(got[0], "a (") {
		t.Fatalf("five beats with other versions: %q, want one WARN naming b and c with their versions", got)
	}
	v.Observe(start.Add(59*time.Minute), mixed)
	if got := lines(); len(got) != 1 {
		t.Fatalf("59 minutes on: %d lines, want no reminder yet", len(got))
	}
	v.Observe(start.Add(time.Hour), mixed)
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], "level=WARN") || !strings.Contains(got[1], "mixed_for=1h0m0s") {
		t.Fatalf("an hour on: %q, want a reminder saying for how long", got)
	}
	v.Observe(start.Add(time.Hour+30*time.Minute), same)
	v.Observe(start.Add(time.Hour+31*time.Minute), same)
	if got := lines(); len(got) != 3 || !strings.Contains(got[2], "level=INFO") || !strings.Contains(got[2], "mixed_for=1h30m0s") {
		t.Fatalf("once the others are gone: %q, want one INFO saying for how long", got)
	}
	// Mixed again later: a new WARN at once, not an hour after the last.
	v.Observe(start.Add(2*time.Hour), mixed)
	if got := lines(); len(got) != 4 || !strings.Contains(got[3], "level=WARN") || !strings.Contains(got[3], "mixed_for=0s") {
		t.Fatalf("mixed again: %q, want a new WARN", got)
	}
}
