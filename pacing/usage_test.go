package pacing

import "time"

// Usage is what a number used of its windows: what the tests read of a
// governor's state.
type Usage struct {
	Minute, Hour, Day int
}

// Usage returns the sends counted in the number's windows now, reading
// its history first as Reserve does.
func (g *Governor) Usage(key Key, now time.Time, history History) Usage {
	past, _ := g.past(key, now, history)
	g.mu.Lock()
	defer g.mu.Unlock()
	s, _ := g.state(key, now, past)
	return Usage{int(s.rMin.sum), int(s.rHour.sum), int(s.rDay.sum)}
}
