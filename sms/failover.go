package sms

import (
	"context"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Failover (docs/routing.md): a sweep moves the queued jobs of sender
// pools off members whose device stays offline past the pool's
// failover_after, or whose SIM keeps failing with carrier errors.

const (
	// failoverEvery is how often the sweep runs: a job waits at most this
	// long past its pool's failover_after before it moves.
	failoverEvery = 30 * time.Second
	// failoverBatch is how many of a device's jobs one transaction moves
	// (store.Failover): a batch's statements do not grow with its jobs on
	// PostgreSQL, and the device's links are held for one batch at a time.
	failoverBatch = 256
	// failoverBatches bounds the batches one device gives up per sweep
	// (10,240 jobs), so one device's backlog does not hold up the others'
	// for long; the next sweep moves the rest.
	failoverBatches = 40
)

// FailoverHub is what the sweep needs of the phones' links (gateway.Hub):
// whether a device is online and since when it is not, and a hold on its
// links while its jobs move, so no link hands them to the phone meanwhile.
type FailoverHub interface {
	Online(fingerprint string, deviceID uint64) bool
	OfflineSince(fingerprint string, deviceID uint64) time.Time
	HoldDevice(fingerprint string, deviceID uint64, fn func(dispatchedUpTo uint64, online bool) error) error
}

// SetFailoverHub wires the hub for the failover sweep; call it before
// serving. Without one nothing moves.
func (s *Service) SetFailoverHub(h FailoverHub) error {
	seq, err := s.store.MessageSequence()
	if err != nil {
		return err
	}
	s.hub, s.startSeq, s.started = h, seq, s.now()
	return nil
}

// runFailover sweeps every failoverEvery until ctx ends.
func (s *Service) runFailover(ctx context.Context) {
	t := time.NewTicker(failoverEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.failover(ctx)
		}
	}
}

type poolDevice struct {
	companyID, deviceID uint64
	fingerprint         string
}

// Failover runs one sweep now and returns the jobs it moved.
func (s *Service) Failover() []store.Message { return s.failover(context.Background()) }

// failover runs one sweep, device by device until ctx ends (the next
// sweep takes the devices left), and returns the jobs it moved. Its work
// besides the store's is linear in the pools' members: the devices down
// for a pool (offline past its failover_after) are worked out once per
// company and failover_after, not per device that moves.
func (s *Service) failover(ctx context.Context) []store.Message {
	if s.hub == nil {
		return nil
	}
	pools, err := s.store.AllPools()
	if err != nil {
		s.log.Error("failover: list pools", "err", err)
		return nil
	}
	now := s.now()
	// Each member device with the pools (failover on) it is in.
	in := map[poolDevice][]store.Pool{}
	failing := map[uint64]map[uint64][]string{} // company -> device -> slots
	for _, p := range pools {
		if p.FailoverAfter <= 0 {
			continue
		}
		if _, ok := failing[p.CompanyID]; !ok {
			f, err := s.store.CarrierFailing(p.CompanyID, now)
			if err != nil {
				s.log.Error("failover: carrier errors", "err", err)
				return nil
			}
			failing[p.CompanyID] = f
		}
		seen := map[uint64]bool{}
		for _, m := range p.Members {
			if !seen[m.DeviceID] {
				seen[m.DeviceID] = true
				k := poolDevice{p.CompanyID, m.DeviceID, m.Device}
				in[k] = append(in[k], p)
			}
		}
	}
	// How long each device has been offline; down per pool is past its failover_after.
	offline := map[poolDevice]time.Duration{}
	byCompany := map[uint64][]poolDevice{} // the offline devices of each company
	for d := range in {
		if s.hub.Online(d.fingerprint, d.deviceID) {
			continue
		}
		since := s.hub.OfflineSince(d.fingerprint, d.deviceID)
		if since.IsZero() || since.Before(s.started) {
			since = s.started // no link since the start: offline at least since then
		}
		offline[d] = now.Sub(since)
		byCompany[d.companyID] = append(byCompany[d.companyID], d)
	}
	// The devices down for a pool: the company's devices offline at least
	// its failover_after, one set per company and failover_after, shared
	// (read only) by every move under it.
	type threshold struct {
		companyID uint64
		after     time.Duration
	}
	downs := map[threshold]map[uint64]bool{}
	downFor := func(p store.Pool) map[uint64]bool {
		k := threshold{p.CompanyID, p.FailoverAfter}
		down, ok := downs[k]
		if !ok {
			down = map[uint64]bool{}
			for _, od := range byCompany[p.CompanyID] {
				if offline[od] >= p.FailoverAfter {
					down[od.deviceID] = true
				}
			}
			downs[k] = down
		}
		return down
	}
	var moved []store.Message
	for d, ps := range in {
		if ctx.Err() != nil {
			break
		}
		for _, p := range ps {
			var slots []string
			if off, ok := offline[d]; ok && off >= p.FailoverAfter {
				slots = []string{""}
			} else {
				slots = failing[d.companyID][d.deviceID]
			}
			for _, slot := range slots {
				reason := store.FailoverOffline
				if slot != "" {
					reason = store.FailoverCarrierErrors
				}
				moved = append(moved, s.failoverDevice(ctx, d, p, slot, reason, downFor(p), now)...)
			}
		}
	}
	s.announce(moved...)
	if len(moved) > 0 {
		s.log.Info("failover moved queued jobs", "count", len(moved))
	}
	return moved
}

// failoverDevice moves the device's undispatched jobs of pool p (from slot,
// "" for both) to other members, failoverBatch a transaction, up to
// failoverBatches of them, holding the device's links for each batch. Each batch
// commits on its own: a batch that fails (or a stop, or a crash) leaves
// the jobs the batches before it moved where they went, and the rest
// where they were, for the next sweep. It returns every job a move
// committed, even when the hold then failed: a cluster's hold is a
// transaction of its own, which runs fn again when it is retried and may
// fail as it commits, while each move commits in its own; a job moved and
// not returned is never told, nor its new device's link woken.
func (s *Service) failoverDevice(ctx context.Context, d poolDevice, p store.Pool, slot, reason string, down map[uint64]bool, now time.Time) []store.Message {
	var moved []store.Message
	var cursor uint64 // the place the last batch looked at jobs up to
	for range failoverBatches {
		if ctx.Err() != nil {
			break
		}
		more := false
		err := s.hub.HoldDevice(d.fingerprint, d.deviceID, func(upTo uint64, _ bool) error {
			ms, next, err := s.store.Failover(store.FailoverInput{
				CompanyID: d.companyID, DeviceID: d.deviceID, Slot: slot, After: max(upTo, s.startSeq, cursor),
				Reason: reason, Down: down, Pools: map[uint64]bool{p.ID: true}, Limit: failoverBatch,
			}, slotCheck, now)
			if err != nil {
				return err
			}
			moved = append(moved, ms...)
			cursor, more = max(cursor, next), next != 0
			return nil
		})
		if err != nil {
			s.log.Error("failover", "device", d.fingerprint, "moved", len(moved), "err", err)
			break
		}
		if !more {
			break
		}
	}
	return moved
}
