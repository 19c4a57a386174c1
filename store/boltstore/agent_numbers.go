package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// WhatsApp numbers and iMessage handles ("agent numbers"). Agents announce
// them in hello; each gets a record per company, channel and address, so a
// number that moves to another agent of the company keeps its id, its queue,
// its caps and its history, and the same number announced by another company
// gets a record of its own that never meets this one.
//
//	agent_numbers    company(8) channel(1) address        -> AgentNumber
//	agent_number_ids public id                            -> company(8) channel(1) address
//	agent_number_ref company(8) number id(8)              -> company(8) channel(1) address
//
//	agent_number_held company(8) device id(8) channel(1) address -> nil: what a registration holds
//
// Who holds a number: the device registration whose hello announced it last.
// A hello that no longer announces a number the device held lets it go (an
// agent whose WhatsApp session ended, say): the number is held by nobody,
// shows offline, and its sends wait in its queue until an agent announces
// it again, as they do while its agent is offline. A hello that announces
// none at all lets them go too; the device's record says when it holds
// none (Device.NoNumbers: cleared here, in the transaction that gives it
// one), so that an SMS phone's hello makes no write of numbers.

var (
	bucketAgentNumbers   = []byte("agent_numbers")
	bucketAgentNumberIDs = []byte("agent_number_ids")
	bucketAgentNumberRef = []byte("agent_number_ref")
	bucketAgentQueue     = []byte("agent_queue")    // company(8) number id(8) message id(8) -> nil: queued, in order
	bucketAgentMessages  = []byte("agent_messages") // company(8) number id(8) message id(8) -> nil: both directions
	bucketAgentSends     = []byte("agent_sends")    // company(8) number id(8) created_at(8) message id(8) -> nil: accepted sends by time
	bucketAgentInClient  = []byte("agent_inbound_client")
	bucketAgentHeld      = []byte("agent_number_held")
	bucketAgentMsgCounts = []byte("agent_message_counts") // company(8) number id(8) -> count(8): the keys of agent_messages under the pair
	bucketAgentHanded    = []byte("agent_handed")         // company(8) device id(8) message id(8) -> nil: queued, handed to the registration (handedKey)
	agentBuckets         = [][]byte{bucketAgentNumbers, bucketAgentNumberIDs, bucketAgentNumberRef, bucketAgentQueue, bucketAgentMessages, bucketAgentSends, bucketAgentInClient, bucketAgentHeld, bucketAgentMsgCounts, bucketAgentHanded}
)

func heldKey(companyID, deviceID uint64, channel, address string) []byte {
	return devKey(companyID, deviceID, []byte{ChannelByte(channel)}, []byte(address))
}

func agentNumberKey(companyID uint64, channel, address string) []byte {
	k := make([]byte, 0, 9+len(address))
	k = append(k, itob(companyID)...)
	k = append(k, ChannelByte(channel))
	return append(k, address...)
}

// AnnounceNumbers records that the device (a live registration of the
// company) can send from these addresses (already normalised) on channel: a
// new address gets a record, with its warm-up starting now; a known one
// moves to this device; one the device held and no longer announces is
// let go. It returns the records, in the order given. A new
// record beyond limit records of the company on the channel is
// ErrTooManyNumbers, and nothing is stored; limit 0 means no limit.
func (s *Store) AnnounceNumbers(companyID, deviceID uint64, channel string, addresses []string, now time.Time, limit int) ([]AgentNumber, error) {
	return s.AnnounceAgentNumbers(companyID, deviceID, []store.Announced{{Channel: channel, Addresses: addresses}}, now, limit)
}

// AnnounceAgentNumbers is AnnounceNumbers of every set, in one
// transaction: a hello's WhatsApp numbers and iMessage handles are stored
// together or not at all. A set past its channel's limit refuses the whole
// announcement with a *store.TooManyNumbersError naming the channel
// (ErrTooManyNumbers to errors.Is). It returns the records of all the
// sets, in the order given. A device deleted, or of a company closing
// (MarkCompanyClosing) or not stored, is ErrDeviceGone, read in the
// write's own transaction (liveDeviceRefOfOpenCompany), and nothing is
// stored: an agent whose hello's device write came before the mark takes
// or lets go no number after it.
func (s *Store) AnnounceAgentNumbers(companyID, deviceID uint64, sets []store.Announced, now time.Time, limit int) ([]AgentNumber, error) {
	var out []AgentNumber
	err := s.grouped(func(tx *bolt.Tx) error {
		out = out[:0]
		d, err := liveDeviceRefOfOpenCompany(tx, companyID, deviceID)
		if err != nil {
			return refuse(err) // nothing written: the batch commits without it
		}
		if slices.ContainsFunc(sets, func(a store.Announced) bool { return len(a.Addresses) > 0 }) {
			// It holds a number once this commits: its record must not
			// say it holds none (Device.NoNumbers).
			if err := mayHoldNumbers(tx, companyID, deviceID); err != nil {
				return err
			}
		}
		for _, set := range sets {
			if out, err = announce(tx, d, set.Channel, set.Addresses, now, limit, out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		channels := make([]string, len(sets))
		for i, set := range sets {
			channels[i] = set.Channel
		}
		return nil, fmt.Errorf("store: announce %s numbers of device %d: %w", strings.Join(channels, " and "), deviceID, err)
	}
	return out, nil
}

// announce stores one channel's set of AnnounceAgentNumbers, appending
// its records to out.
func announce(tx *bolt.Tx, d liveRef, channel string, addresses []string, now time.Time, limit int, out []AgentNumber) ([]AgentNumber, error) {
	companyID := d.CompanyID
	b, held := tx.Bucket(bucketAgentNumbers), tx.Bucket(bucketAgentHeld)
	for _, addr := range addresses {
		k := agentNumberKey(companyID, channel, addr)
		var n AgentNumber
		err := getJSON(b, k, &n)
		switch {
		case errors.Is(err, ErrNotFound):
			if limit > 0 && countPrefix(b, agentNumberKey(companyID, channel, ""), limit) >= limit {
				return out, &store.TooManyNumbersError{Channel: channel}
			}
			if n.ID, err = b.NextSequence(); err != nil {
				return out, err
			}
			if n.PublicID, err = store.NewNumberPublicID(channel); err != nil {
				return out, err
			}
			n.CompanyID, n.Channel, n.Address, n.FirstSeen, n.Status = companyID, channel, addr, now.UTC(), NumberActive
			if err := tx.Bucket(bucketAgentNumberIDs).Put([]byte(n.PublicID), k); err != nil {
				return out, err
			}
			if err := tx.Bucket(bucketAgentNumberRef).Put(pair(companyID, n.ID), k); err != nil {
				return out, err
			}
		case err != nil:
			return out, err
		case n.DeviceID == d.ID && n.Device == d.Fingerprint:
			out = append(out, n)
			continue // nothing changed: no write
		}
		if n.DeviceID != 0 {
			if err := held.Delete(heldKey(companyID, n.DeviceID, channel, addr)); err != nil {
				return out, err
			}
		}
		n.DeviceID, n.Device, n.UpdatedAt = d.ID, d.Fingerprint, now.UTC()
		if err := putJSON(b, k, n); err != nil {
			return out, err
		}
		if err := held.Put(heldKey(companyID, d.ID, channel, addr), nil); err != nil {
			return out, err
		}
		out = append(out, n)
	}
	return out, letGo(b, held, companyID, d.ID, channel, addresses, now)
}

// holdsNumbers says whether the registration holds a number or handle of
// any channel: one seek in agent_number_held, where its entries, if any,
// come first under its company and id.
func holdsNumbers(tx *bolt.Tx, companyID, deviceID uint64) bool {
	return countPrefix(tx.Bucket(bucketAgentHeld), devKey(companyID, deviceID), 1) > 0
}

// mayHoldNumbers unsets the device record's NoNumbers, writing the record
// only when it was set: an agent's hello reads the record, and writes it
// once after a time without numbers.
func mayHoldNumbers(tx *bolt.Tx, companyID, deviceID uint64) error {
	d, err := liveDeviceByID(tx, companyID, deviceID)
	if err != nil || !d.NoNumbers {
		return err
	}
	d.NoNumbers = false
	return putJSON(tx.Bucket(bucketDevices), []byte(d.Fingerprint), &d)
}

// letGo releases the numbers of channel the device holds and did not
// announce now: held by nobody, until an agent announces them again.
func letGo(b, held *bolt.Bucket, companyID, deviceID uint64, channel string, announced []string, now time.Time) error {
	prefix := heldKey(companyID, deviceID, channel, "")
	var gone [][]byte
	c := held.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if !slices.Contains(announced, string(k[len(prefix):])) {
			gone = append(gone, bytes.Clone(k))
		}
	}
	for _, k := range gone {
		if err := held.Delete(k); err != nil {
			return err
		}
		nk := agentNumberKey(companyID, channel, string(k[len(prefix):]))
		var n AgentNumber
		if err := getJSON(b, nk, &n); err != nil {
			if errors.Is(err, ErrNotFound) {
				continue
			}
			return err
		}
		if n.DeviceID != deviceID {
			continue
		}
		n.DeviceID, n.UpdatedAt = 0, now.UTC() // Device stays: the agent that held it last
		if err := putJSON(b, nk, n); err != nil {
			return err
		}
	}
	return nil
}

// AgentNumbers lists the company's numbers (or handles) of channel, by address.
func (s *Store) AgentNumbers(companyID uint64, channel string) ([]AgentNumber, error) {
	var out []AgentNumber
	err := s.view(func(tx *bolt.Tx) (err error) {
		out, err = agentNumbersIn(tx, companyID, channel)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: %s numbers of company %d: %w", channel, companyID, err)
	}
	return out, nil
}

// agentNumbersIn reads the company's numbers (or handles) of channel, by
// address.
func agentNumbersIn(tx *bolt.Tx, companyID uint64, channel string) ([]AgentNumber, error) {
	var out []AgentNumber
	var err error
	walkPrefix(tx.Bucket(bucketAgentNumbers), agentNumberKey(companyID, channel, ""), func(_, v []byte) bool {
		var n AgentNumber
		if err = jsonUnmarshal(v, &n); err != nil {
			return false
		}
		out = append(out, n)
		return true
	})
	return out, err
}

// AgentNumbersSentSince lists the company's numbers of channel, as
// AgentNumbers does, and counts each one's accepted sends since since
// (sent[i] is list[i]'s), in one transaction: what a list of the numbers
// shows, read once for all of them.
func (s *Store) AgentNumbersSentSince(companyID uint64, channel string, since time.Time) (list []AgentNumber, sent []int, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		var err error
		if list, err = agentNumbersIn(tx, companyID, channel); err != nil {
			return err
		}
		sent = make([]int, len(list))
		c := tx.Bucket(bucketAgentSends).Cursor()
		for i, n := range list {
			sent[i] = countAgentSends(c, companyID, n.ID, since)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: %s numbers of company %d with their sends: %w", channel, companyID, err)
	}
	return list, sent, nil
}

// AgentNumbersNew counts the addresses (already normalised; one named
// twice counts once) that are no number (or handle) of the company on
// channel yet, and, only when one is, the company's numbers of channel:
// what a hello's check of the company's bound reads. It looks up the
// addresses' keys and counts the keys under the company's prefix, decoding
// no record; have is 0 when fresh is.
func (s *Store) AgentNumbersNew(companyID uint64, channel string, addresses []string) (fresh, have int, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		fresh, have = 0, 0
		b := tx.Bucket(bucketAgentNumbers)
		for i, addr := range addresses {
			if b.Get(agentNumberKey(companyID, channel, addr)) == nil && !slices.Contains(addresses[:i], addr) {
				fresh++
			}
		}
		if fresh > 0 {
			have = countPrefix(b, agentNumberKey(companyID, channel, ""), math.MaxInt)
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store: new %s numbers of company %d: %w", channel, companyID, err)
	}
	return fresh, have, nil
}

// numberByPublicID finds the company's number of channel by its public id;
// another company's id, or another channel's, is ErrNotFound.
func numberByPublicID(tx *bolt.Tx, companyID uint64, channel, publicID string) (AgentNumber, []byte, error) {
	var n AgentNumber
	k := tx.Bucket(bucketAgentNumberIDs).Get([]byte(publicID))
	if k == nil || !bytes.HasPrefix(k, agentNumberKey(companyID, channel, "")) {
		return n, nil, ErrNotFound
	}
	k = append([]byte(nil), k...)
	return n, k, getJSON(tx.Bucket(bucketAgentNumbers), k, &n)
}

// noteTaken records that an agent took one of the number's jobs now.
func noteTaken(tx *bolt.Tx, companyID, numberID uint64, now time.Time) error {
	k := tx.Bucket(bucketAgentNumberRef).Get(pair(companyID, numberID))
	if k == nil {
		return nil // the number is gone; its jobs may still report
	}
	b := tx.Bucket(bucketAgentNumbers)
	var n AgentNumber
	if err := getJSON(b, k, &n); err != nil {
		return err
	}
	n.LastTakenAt = now.UTC()
	return putJSON(b, k, n)
}

// numberByRef finds the company's number by the store's id.
func numberByRef(tx *bolt.Tx, companyID, numberID uint64) (AgentNumber, error) {
	var n AgentNumber
	k := tx.Bucket(bucketAgentNumberRef).Get(pair(companyID, numberID))
	if k == nil {
		return n, ErrNotFound
	}
	return n, getJSON(tx.Bucket(bucketAgentNumbers), k, &n)
}

// AgentNumber returns the company's number of channel with this public id.
func (s *Store) AgentNumber(companyID uint64, channel, publicID string) (AgentNumber, error) {
	var n AgentNumber
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		n, _, err = numberByPublicID(tx, companyID, channel, publicID)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("store: %s number %s: %w", channel, publicID, err)
	}
	return n, nil
}

// UpdateAgentNumber changes the company's number of channel through fn and stores it.
func (s *Store) UpdateAgentNumber(companyID uint64, channel, publicID string, now time.Time, fn func(*AgentNumber) error) (AgentNumber, error) {
	var out AgentNumber
	err := s.grouped(func(tx *bolt.Tx) error {
		n, k, err := numberByPublicID(tx, companyID, channel, publicID)
		if err != nil {
			return err
		}
		n, changed, err := store.ChangeAgentNumber(n, now, fn)
		if err != nil {
			return err
		}
		out = n
		if !changed {
			return nil // updated_at included, as it was
		}
		return putJSON(tx.Bucket(bucketAgentNumbers), k, n)
	})
	if err != nil {
		return out, fmt.Errorf("store: update %s number %s: %w", channel, publicID, err)
	}
	return out, nil
}

// agentSendTimes lists the number's accepted sends since since, from the
// index of sends by time: what the governor rebuilds its windows from.
func agentSendTimes(tx *bolt.Tx, companyID, numberID uint64, since time.Time) []time.Time {
	var out []time.Time
	prefix := pair(companyID, numberID)
	c := tx.Bucket(bucketAgentSends).Cursor()
	for k, _ := c.Seek(append(pair(companyID, numberID), timeKey(since)...)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		out = append(out, time.Unix(0, int64(btoi(k[16:24]))).UTC())
	}
	return out
}

// countAgentSends counts the number's accepted sends since since in the
// index of sends by time, through c, a cursor of it.
func countAgentSends(c *bolt.Cursor, companyID, numberID uint64, since time.Time) int {
	n := 0
	prefix := pair(companyID, numberID)
	for k, _ := c.Seek(append(pair(companyID, numberID), timeKey(since)...)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n
}

// AgentSendsSince counts the number's accepted sends since since.
func (s *Store) AgentSendsSince(companyID, numberID uint64, since time.Time) (int, error) {
	n := 0
	err := s.view(func(tx *bolt.Tx) error {
		n = countAgentSends(tx.Bucket(bucketAgentSends).Cursor(), companyID, numberID, since)
		return nil
	})
	return n, err
}

// AgentSendTimes lists the number's accepted sends since since (for a
// governor that has not seen the number since it started).
func (s *Store) AgentSendTimes(companyID, numberID uint64, since time.Time) ([]time.Time, error) {
	var out []time.Time
	err := s.view(func(tx *bolt.Tx) error {
		out = agentSendTimes(tx, companyID, numberID, since)
		return nil
	})
	return out, err
}

// PruneAgentSends drops entries of the index of accepted sends older than
// cutoff: the governor's longest window is a day.
func (s *Store) PruneAgentSends(cutoff time.Time) (int, error) {
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		n, err = deleteWhere(tx.Bucket(bucketAgentSends), func(k, _ []byte) (bool, error) {
			return len(k) >= 24 && int64(btoi(k[16:24])) < cutoff.UnixNano(), nil
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune accepted sends: %w", err)
	}
	return n, nil
}

// AgentNumberByRef returns the company's number by the store's id.
func (s *Store) AgentNumberByRef(companyID, numberID uint64) (AgentNumber, error) {
	var n AgentNumber
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		n, err = numberByRef(tx, companyID, numberID)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("store: number %d: %w", numberID, err)
	}
	return n, nil
}

// countPrefix counts the keys under prefix, stopping at upTo.
func countPrefix(b *bolt.Bucket, prefix []byte, upTo int) int {
	n := 0
	walkPrefix(b, prefix, func(_, _ []byte) bool { n++; return n < upTo })
	return n
}
