package agent

import (
	"fmt"
	"testing"
	"time"
)

// A link keeps a report refused for now (retry_after) until its time, and
// what it sent by journal record; both are dropped once the record leaves
// the outbox (answered on another link, refused for good, pruned), so a
// link that lives for months holds no entry per report it ever carried.
func TestLinkForgetsWhatLeftTheOutbox(t *testing.T) {
	t.Parallel()
	l := &link{waiting: map[string]bool{}, later: map[string]time.Time{}, sent: map[string]bool{}}
	for i := range 1000 {
		key := fmt.Sprintf("s:job-%d\x00sent\x00", i)
		l.later[key] = time.Now().Add(time.Hour)
		l.sent[fmt.Sprintf("r%d", i)] = true
	}
	l.forget([]string{"r7"}, []string{"s:job-7\x00sent\x00"})
	if len(l.later) != 1 || len(l.sent) != 1 {
		t.Fatalf("held back %d, sent %d after the outbox kept one record; want 1 and 1", len(l.later), len(l.sent))
	}
	if _, ok := l.later["s:job-7\x00sent\x00"]; !ok || !l.sent["r7"] {
		t.Fatalf("the record still in the outbox was forgotten: later %v, sent %v", l.later, l.sent)
	}
}
