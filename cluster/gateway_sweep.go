package cluster

import (
	"context"
	"fmt"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// sweepLoop sweeps every SweepEvery until ctx ends.
func (g *Gateway) sweepLoop(ctx context.Context) {
	t := time.NewTicker(g.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.sweep()
		}
	}
}

// sweep covers the signals the bus lost, and the ends of links here that
// the database did not take (endAgain). Each link here whose epoch is no
// longer its device's newest (the link signal of a newer link elsewhere
// was lost) is closed with 4009; every other link pumps as at a release
// (a lost kick or release: it reads again the agent jobs it passed over,
// once a sweep, not at every kick). One
// query answers the epochs of all the node's links. A close is of the link
// as listed before the queries (its device and epoch), never of whatever
// link holds the fingerprint after them. When the database does not
// answer the first statement of a pass (an end written again, or the
// epochs), the pass asks it nothing more: it waits one store deadline,
// not one per statement, and the next pass reads it all. Then, when this node's own beats
// show the database answered through the live window (Steady), the open
// links of dead nodes are ended, and device presence hears of them as of a
// link's end: a device that links nowhere within the grace is reported
// offline. So does it of the devices a dead node left reported online
// (recheckLeftOnline).
func (g *Gateway) sweep() {
	defer wake(g.sweeps)
	g.mu.Lock()
	g.forgetOld(g.cfg.Now())
	g.mu.Unlock()
	answered := g.endAgain()
	if links := g.hub.Links(); answered && len(links) > 0 {
		ids := make([]uint64, len(links))
		for i, l := range links {
			ids[i] = l.DeviceID
		}
		epochs, err := g.st.LinkEpochs(ids)
		var goneNow map[uint64]bool
		answered = err == nil
		if err != nil {
			// The database did not answer: the devices gone are not asked
			// of it as well, so a pass waits one store deadline, not two;
			// the next sweep reads both.
			g.log.Error("gateway sweep: link epochs", "err", err)
		} else if gone, gerr := g.st.GoneDevices(ids); gerr != nil {
			g.log.Error("gateway sweep: devices deleted or disabled", "err", gerr)
		} else {
			goneNow = gone
		}
		for _, l := range links {
			deleted, isGone := goneNow[l.DeviceID]
			switch {
			case isGone:
				// The disconnect of the request that deleted or disabled
				// the device was lost with the bus: the link would
				// otherwise stay up until its phone dropped it.
				reason := "device disabled"
				if deleted {
					reason = "device deleted"
				}
				// Only the link read above is closed: the device may have
				// been enabled again and linked here since the query.
				g.hub.DisconnectLink(l, proto.CloseDeviceGone, reason)
			case err != nil:
			case epochs[l.DeviceID] > l.Epoch:
				// The link read above only: a device paired again under
				// the fingerprint after a delete may have linked here since
				// the queries, its epochs counting from 1 again.
				g.hub.FenceLink(l, epochs[l.DeviceID])
			default:
				// Pumped here, one link after another: a release (Release)
				// would start every link's pump at once.
				g.hub.Repump(l.Fingerprint, l.DeviceID)
			}
		}
	}
	steady := g.cfg.Steady == nil || g.cfg.Steady()
	if !steady {
		g.broke.Store(true)
	}
	if !answered {
		return
	}
	if g.broke.Load() && (g.cfg.Current == nil || g.cfg.Current()) {
		// Until the beats are steady again, at every sweep: another node
		// that read this one's beat old a moment before it was written may
		// end a link after the first reopen.
		if g.reopen() && steady {
			g.broke.Store(false)
		}
	}
	if !steady {
		// This node's own beats broke within the live window: the database
		// may have been gone for everyone, and the other nodes' silence
		// says nothing of their death (Beats).
		return
	}
	g.recheckLeftOnline()
	devs, err := g.st.EndOrphanLinks(g.cfg.Live, orphanBatch, g.node)
	if err != nil {
		g.log.Error("gateway sweep: links of dead nodes", "err", err)
		return
	}
	if len(devs) == 0 {
		return
	}
	// Every job the dead links can have handed to a phone has a place at
	// or below the sequence read now, after they ended.
	place, err := g.st.MessageSequence()
	if err != nil {
		g.log.Error("gateway sweep: links of dead nodes: queue place", "err", err)
		place = ^uint64(0) // nothing of these devices moves until they link again
	}
	now := g.cfg.Now()
	for _, d := range devs {
		g.mu.Lock()
		g.orphans[d.ID] = orphan{at: now, place: place}
		g.mu.Unlock()
		g.log.Info("gateway sweep: the device's node is dead; its link counts as ended", "device", d.Fingerprint)
		if g.presence != nil {
			g.presence.Down(d)
		}
	}
}

// recheckLeftOnline hands device presence, as a link's end, each device
// still reported online whose last link ended on a node dead (or stopped)
// since: that node held the device's offline check in its memory and took
// it along, and the device read online in its record, with no
// device.offline and no mail, until it linked again. Each is handed over
// once while it is left so (Down again would start its grace again, at
// every sweep); every live node's sweep does it, and the check reports the
// device offline once, whichever node runs it first. It asks at most once a
// live window, the time a node's death takes to be seen anyway: the query
// reads every device reported online (10 ms with 20,000 devices), where
// the sweep's other statements read only the open links, through an index.
func (g *Gateway) recheckLeftOnline() {
	if g.presence == nil {
		return
	}
	now := g.cfg.Now()
	g.mu.Lock()
	due := now.Sub(g.rechecked) >= g.cfg.Live
	if due {
		g.rechecked = now
	}
	g.mu.Unlock()
	if !due {
		return
	}
	devs, err := g.st.LeftOnline(g.cfg.Live, orphanBatch)
	if err != nil {
		g.log.Error("gateway sweep: devices left online by dead nodes", "err", err)
		return
	}
	left := make(map[uint64]bool, len(devs))
	fresh := devs[:0]
	g.mu.Lock()
	for _, d := range devs {
		left[d.ID] = true
		if !g.rechecks[d.ID] {
			g.rechecks[d.ID] = true
			fresh = append(fresh, d)
		}
	}
	for id := range g.rechecks {
		if !left[id] {
			delete(g.rechecks, id)
		}
	}
	g.mu.Unlock()
	for _, d := range fresh {
		g.log.Info("gateway sweep: the node where the device's link ended is dead; its offline check runs here", "device", d.Fingerprint)
		g.presence.Down(d)
	}
}

// reopen records as open again the links of this node that another node
// ended while this one was silent for the live window but alive (paused,
// or cut from the database alone): its phones stayed linked here, and
// would otherwise read offline on every other node, be reported offline
// after the grace and have their pool jobs moved by the other node, until
// they linked again. A link that closed here while its row was reopened
// is ended again (EndLink), as its own end would have left it.
//
// Only a node whose beats broke can have been taken for dead (a pause
// shows as a gap between its beats), so it runs after a break (or the
// start), once the node's beat is written again (Current: the others read
// it live and end none of its links) and at each sweep until its beats
// are steady, not at every sweep: one indexed statement over the node's
// links. So the links are open again at the first sweep after the node's
// first beat. It says whether the database answered.
func (g *Gateway) reopen() bool {
	links := g.hub.Links()
	if len(links) == 0 {
		return true
	}
	held := make(map[uint64]uint64, len(links))
	for _, l := range links {
		held[l.DeviceID] = l.Epoch
	}
	reopened, err := g.st.ReopenLinks(g.node, held)
	if err != nil {
		g.log.Error("gateway sweep: reopen this node's links ended while it was silent", "err", err)
		return false
	}
	if len(reopened) == 0 {
		return true
	}
	still := map[uint64]uint64{}
	for _, l := range g.hub.Links() {
		still[l.DeviceID] = l.Epoch
	}
	for _, id := range reopened {
		if still[id] != held[id] {
			if err := g.st.EndLink(id, held[id]); err != nil {
				g.log.Error("gateway sweep: end a link that closed while it was reopened", "err", err)
				g.mu.Lock()
				g.unended[id] = held[id]
				g.mu.Unlock()
			}
		}
	}
	g.log.Info("gateway sweep: links of this node that another node ended while this one was silent are open again", "links", len(reopened))
	return true
}

// The failover sweep (sms) in a cluster. Each node runs it; what keeps it
// from moving a job that a link already handed to a phone is this node's
// hub, which knows what its own links dispatched (HoldDevice's
// dispatchedUpTo) and holds their pumps. So a device's jobs move only on
// the node that holds or last held its link (device_links.node), or on any
// node when it never had one; and the device's row stays locked while they
// move, so a link of the device registering on any node meanwhile waits
// (ClaimLink) and reads its queue after the move.

// OfflineSince is when the device's last link here ended, or when this
// node took over the link a dead node left (its sweep ended it, or its
// failover found it ended on a node gone), whichever is later: a link here
// that ended before the device linked on the dead node says nothing of how
// long it is offline now. Zero when neither. Both are of the device id:
// a device paired again under the fingerprint after a delete is another
// device, which inherits neither.
func (g *Gateway) OfflineSince(fingerprint string, deviceID uint64) time.Time {
	here := g.hub.OfflineSince(fingerprint, deviceID)
	g.mu.Lock()
	took := g.orphans[deviceID].at
	g.mu.Unlock()
	if took.After(here) {
		return took
	}
	return here
}

// HoldDevice runs fn as the hub's HoldDevice does when this node may move
// the device's jobs (above), with the device's link row locked; otherwise
// it does nothing: the node that may will.
func (g *Gateway) HoldDevice(fingerprint string, deviceID uint64, fn func(dispatchedUpTo uint64, online bool) error) error {
	return g.st.HoldLink(deviceID, g.cfg.Live, func(node string, epoch uint64, open, nodeLive bool, endedAgo time.Duration) error {
		switch {
		case node == "" || node == g.node:
		case nodeLive || open:
			// The node holding or last holding the link moves its jobs;
			// a dead node's open link is first ended by a sweep, whose
			// node takes it over.
			return nil
		case endedAgo >= g.cfg.JobLife:
			// The last link was on a node gone since and ended so long
			// ago that every job it handed to the phone has left the
			// queue: any live node moves every job, nothing to take over
			// (gateway_forget.go).
		default:
			// The last link was on a node gone since: any live node
			// takes the device over, moving only what was queued after
			// it first found that link ended with its node gone.
			if err := g.takeOver(fingerprint, deviceID, epoch); err != nil {
				return err
			}
		}
		g.mu.Lock()
		o, took := g.orphans[deviceID]
		g.mu.Unlock()
		if !took {
			return g.hub.HoldDevice(fingerprint, deviceID, fn)
		}
		return g.hub.HoldDevice(fingerprint, deviceID, func(upTo uint64, online bool) error {
			return fn(max(upTo, o.place), online)
		})
	})
}

// takeOver records, once per link, the queue place now for a device whose
// last link (of epoch) was on a node gone: that node handed nothing above
// it to the phone. What this node took over of an earlier link of the
// device (its sweep ended it, or an earlier take) says nothing of this one:
// the device linked since, on a node that handed jobs above that place to
// the phone, and has gone too; so it is taken afresh, from now.
func (g *Gateway) takeOver(fingerprint string, deviceID, epoch uint64) error {
	g.mu.Lock()
	o, took := g.orphans[deviceID]
	g.mu.Unlock()
	if took && o.epoch == epoch {
		return nil
	}
	place, err := g.st.MessageSequence()
	if err != nil {
		return fmt.Errorf("cluster: take over %s: %w", fingerprint, err)
	}
	g.mu.Lock()
	if o, took := g.orphans[deviceID]; !took || o.epoch != epoch {
		g.orphans[deviceID] = orphan{at: g.cfg.Now(), place: place, epoch: epoch}
	}
	g.mu.Unlock()
	return nil
}
