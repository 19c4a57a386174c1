package cluster

import (
	"sync"
	"time"
)

// replyEvery spaces a node's answers to newcomers on the bus (census and
// settings): at most ten a second, however many newcomers speak.
const replyEvery = 100 * time.Millisecond

// pacedReply says a node's own message to the newcomers it hears: at once
// for the first, then at most once per spacing, the newcomers heard
// meanwhile answered together by one message when the spacing has passed.
// Every newcomer hears the node within a spacing, and a flood of forged
// newcomers costs the bus one message per spacing, not one per name.
type pacedReply struct {
	spacing time.Duration
	say     func()

	mu      sync.Mutex
	last    time.Time // the last answer, on this machine's clock
	pending bool      // an answer is due at last+spacing
	stopped bool      // the node said goodbye: no answer after it
}

func newPacedReply(spacing time.Duration, say func()) *pacedReply {
	return &pacedReply{spacing: spacing, say: say}
}

// ask answers a newcomer, now or when the spacing has passed.
func (r *pacedReply) ask() {
	r.mu.Lock()
	if r.pending || r.stopped {
		r.mu.Unlock()
		return
	}
	wait := r.spacing - time.Since(r.last)
	if wait <= 0 {
		r.last = time.Now()
		r.mu.Unlock()
		r.say()
		return
	}
	r.pending = true
	r.mu.Unlock()
	time.AfterFunc(wait, func() {
		r.mu.Lock()
		r.pending = false
		stopped := r.stopped
		r.last = time.Now()
		r.mu.Unlock()
		if !stopped {
			r.say()
		}
	})
}

// stop drops an answer still due: the node is leaving.
func (r *pacedReply) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}
