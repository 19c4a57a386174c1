package gateway

import (
	"context"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// Agents is WhatsApp and iMessage as the hub uses them (channel.Service).
// A link carries the jobs of the numbers and handles its hello announced,
// one number after another, each paced by its gap.
type Agents interface {
	// CheckAnnounce holds the hello's numbers, handles and jobs to
	// Announce's and Release's rules, storing nothing, and returns them as
	// those store them: a problem refuses the hello before any part of it
	// is stored, and the hello is checked once.
	CheckAnnounce(ctx context.Context, dev store.Device, hello proto.Hello) (channel.CheckedAnnounce, error)
	// Announce records the hello's numbers and handles, as CheckAnnounce
	// found them (the zero value: none, the device's numbers let go), for
	// the device and returns the numbers (store ids) whose jobs the link
	// carries.
	Announce(ctx context.Context, dev store.Device, hello channel.CheckedAnnounce) ([]uint64, error)
	// Pending returns up to limit jobs of the number after seq after, when
	// the device holds the number and it is not paused (a paused number's
	// jobs are held; resuming it kicks the link).
	Pending(ctx context.Context, dev store.Device, numberID, after uint64, limit int) ([]sms.Job, error)
	// HandOut records, durably, that the job (its Seq) goes to the device,
	// before the link writes it; false: it may not (the number moved or
	// was paused since the read, the job was taken, or another agent that
	// still exists was handed it first).
	HandOut(ctx context.Context, dev store.Device, seq uint64) (bool, error)
	// Release takes the agent's word at its hello (hello.jobs, as
	// CheckAnnounce found it): the jobs handed to the device that it does
	// not name were lost with a link, and go to their numbers' holders,
	// whose links it kicks.
	Release(ctx context.Context, dev store.Device, hello channel.CheckedAnnounce) error
	// Ready's wait is 0 when the number may dispatch a job now (and starts
	// its gap: the turn, which gives it back), otherwise how long until it
	// may (a number paused since its job was read waits); an error is the
	// store's, which ends the link as at the queue's other reads.
	Ready(dev store.Device, numberID uint64) (turn *pacing.Turn, wait time.Duration, err error)
	// Waits is how long the number's gap still holds its next job back,
	// as far as this node knows without reading anything (0: not, or not
	// known); a gap changed since may be shorter, and a change releases
	// the link (Hub.Release).
	Waits(dev store.Device, numberID uint64) time.Duration
	// Inbound stores a WhatsApp or iMessage message, once per client_id.
	Inbound(ctx context.Context, dev store.Device, in proto.Inbound) (proto.InboundAck, error)
}

// SetAgents wires WhatsApp and iMessage; call it before serving. Without
// it, hello's numbers and jobs are ignored and agent inbound frames are
// refused.
func (h *Hub) SetAgents(a Agents) { h.agents = a }

// line is one number a link carries jobs for.
type line struct {
	id     uint64 // the number's store id
	cursor uint64 // seq of the last job this link took from its queue
	// passed is the seq of the first job the link passed over because
	// another agent was handed it, or its hand-out was refused (0: none):
	// a release (Hub.Release) reads from it again, since that agent's
	// deletion, or the number's resume, releases it to this one.
	passed uint64
	// gapped says the number's next job waited for its gap at the last
	// check (Ready), and the gap timer is armed for it: until the pause
	// ends (Agents.Waits) a pump reads neither the queue nor the number
	// again. A release clears it (a new gap may be shorter).
	gapped bool
}

// passOver moves the line's cursor past the job seq, which the link leaves
// to another agent: the first one passed over is read again at a release
// (rewind).
func (l *line) passOver(seq uint64) {
	if l.passed == 0 {
		l.passed = seq
	}
	l.cursor = seq
}

// rewind, at a release, makes the link read again the jobs of its numbers
// it passed over as another agent's, and checks again the numbers that
// waited for their gap (a gap made shorter lets a job go sooner); pumpMu
// held.
func (c *conn) rewind() {
	for i := range c.lines {
		l := &c.lines[i]
		l.gapped = false
		if l.passed != 0 {
			l.cursor = min(l.cursor, l.passed-1)
			l.passed = 0
		}
	}
}

func isAgentChannel(ch string) bool {
	return ch == proto.ChannelWhatsApp || ch == proto.ChannelIMessage
}

// passedBatch is how many jobs of a number a link reads at once after it
// passed over all the jobs of its last read: an agent back after its jobs'
// TTL ended finds them all still queued until the expiry sweep marks them
// (within a minute), and read one at a time they held the pump for as many
// reads as there were jobs.
const passedBatch = 32

// passes says whether the link passes over the job, and moves the line's
// cursor past it if so: its TTL ended (the sweeper marks it), it was
// handed to another agent, or it was written to this link already.
// pumpMu held.
func (c *conn) passes(l *line, j sms.Job) bool {
	switch {
	case j.Send == nil: // expired: the sweeper marks it
		l.cursor = j.Seq
	case j.HandedTo != 0 && j.HandedTo != c.dev.ID:
		// Handed to the number's former agent, which may have taken it
		// (its ack lost): it is that agent's until it reports it or is
		// deleted (PROTOCOL.md section 16.1).
		l.passOver(j.Seq)
	default:
		if _, mine := c.inflight[j.Send.ID]; !mine {
			return false
		}
		l.cursor = j.Seq // written to this link already: read again after a rewind
	}
	return true
}

// pumpAgents hands the numbers' jobs to the link while the window has room,
// each number at most one job per gap; a number that must wait arms one
// timer for the earliest. pumpMu held.
func (c *conn) pumpAgents() {
	agents := c.hub.agents
	if agents == nil || len(c.lines) == 0 {
		return
	}
	var earliest time.Duration
	for i := range c.lines {
		l := &c.lines[i]
		// One job a read, the one that goes next; after a read whose jobs
		// the link all passed over, passedBatch a read.
		limit := 1
		for {
			if c.hub.cfg.MaxInflight-len(c.inflight) <= 0 || c.closed() {
				return
			}
			if l.gapped {
				// Its job waits for the gap: a kick (another number's
				// job, an SMS) or an ack within the pause reads nothing
				// of it.
				if wait := agents.Waits(c.dev, l.id); wait > 0 {
					if earliest == 0 || wait < earliest {
						earliest = wait
					}
					break
				}
				l.gapped = false
			}
			if c.gated("load pending agent jobs") {
				return
			}
			jobs, err := agents.Pending(context.Background(), c.dev, l.id, l.cursor, limit)
			if err != nil {
				// The link ends, as when its SMS queue cannot be read
				// (pumpSMS): left up, it would read this queue again
				// only at the next send or ack.
				c.storeFault(err, "load pending agent jobs", "device", c.dev.Fingerprint, "number", l.id)
				return
			}
			c.hub.reached()
			if len(jobs) == 0 {
				break
			}
			k := 0
			for k < len(jobs) && c.passes(l, jobs[k]) {
				k++
			}
			if k == len(jobs) {
				limit = passedBatch // more may follow: read them many at a time
				continue
			}
			limit = 1
			j := jobs[k]
			turn, wait, err := agents.Ready(c.dev, l.id)
			if err != nil {
				c.storeFault(err, "check an agent job's number", "device", c.dev.Fingerprint, "number", l.id)
				return
			}
			c.hub.reached()
			if wait > 0 {
				if earliest == 0 || wait < earliest {
					earliest = wait
				}
				l.gapped = true
				break
			}
			// From here, a job that does not go to the link gives the
			// number's gap back (turn): it went to no agent, and the
			// number's next job need not wait for it. The gap of the job
			// before it still holds the next one back.
			if j.HandedTo != c.dev.ID {
				// Recorded before the frame is written: once written, the
				// job may be in the agent's journal whatever becomes of
				// the link, and no other agent may have it.
				ok, err := agents.HandOut(context.Background(), c.dev, j.Seq)
				if err != nil {
					turn.GiveBack()
					c.storeFault(err, "hand out an agent job", "device", c.dev.Fingerprint, "number", l.id)
					return
				}
				c.hub.reached()
				if !ok {
					// Moved, paused, taken or handed to another agent
					// since the read: passed over, read again at a
					// release (a resume releases the number's jobs).
					turn.GiveBack()
					l.passOver(j.Seq)
					continue
				}
			}
			if !c.send(j.Send) {
				turn.GiveBack() // the link is closing: the job waits for the next one
				return
			}
			c.take(j.Send.ID)
			l.cursor = j.Seq
		}
	}
	if earliest <= 0 {
		return
	}
	// One timer for the earliest wait of all the numbers: a wait sooner
	// than the one armed (another number's shorter gap, a gap made shorter)
	// arms it again, or that number's jobs would wait out the other's.
	due := time.Now().Add(earliest)
	if c.gapTimer != nil {
		if !due.Before(c.gapDue) {
			return
		}
		c.gapTimer.Stop()
	}
	// Its pump is one of the link's counted goroutines (timerPump), as the
	// pace's timer's (pumpSMS).
	var timer *time.Timer
	timer = time.AfterFunc(earliest, func() {
		c.pumpMu.Lock()
		if c.gapTimer == timer { // not one armed since, after this one stopped
			c.gapTimer = nil
		}
		c.pumpMu.Unlock()
		c.timerPump()
	})
	c.gapTimer, c.gapDue = timer, due
}
