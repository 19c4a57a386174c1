package boltstore

// The dump's kinds of the sending: messages, Idempotency-Key answers,
// opt-outs, device failures, pools and sticky senders, the SIMs' caps and
// counts, and the agents' numbers, sends and messages.

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// dumpMessages gives the messages of every channel but the agents'
// (dumpAgentMessages).
func dumpMessages(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketMessages, func(_ []byte, m Message) error {
		if store.IsAgentChannel(m.Channel) {
			return nil
		}
		return put(store.CopyMessage{Message: m})
	})
}

// dumpIdempotency gives the answers kept for Idempotency-Keys, those kept
// before keys had routes (company id and key alone) with no route.
func dumpIdempotency(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketIdempotency, func(k []byte, a Idempotent) error {
		if len(k) < 9 {
			return fmt.Errorf("%s: malformed key %x", bucketIdempotency, k)
		}
		r := store.CopyIdempotency{CompanyID: btoi(k[:8]), Key: string(k[8:]), Answer: a}
		if k[8] == 0 {
			route, key, ok := bytes.Cut(k[9:], []byte{0})
			if !ok {
				return fmt.Errorf("%s: malformed key %x", bucketIdempotency, k)
			}
			r.Route, r.Key = string(route), string(key)
		}
		return put(r)
	})
}

func dumpOptOuts(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketOptOuts, func(k []byte, o OptOut) error {
		if len(k) < 8 {
			return fmt.Errorf("%s: malformed key %x", bucketOptOuts, k)
		}
		if o.Phone == "" {
			o.Phone = string(k[8:])
		}
		return put(store.CopyOptOut{CompanyID: btoi(k[:8]), OptOut: o})
	})
}

// dumpDeviceFailures gives each device's failures oldest first.
func dumpDeviceFailures(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketDeviceFailures, func(k []byte, list []DeviceFailure) error {
		if len(k) != 16 {
			return fmt.Errorf("%s: malformed key %x", bucketDeviceFailures, k)
		}
		for i := len(list) - 1; i >= 0; i-- {
			if err := put(store.CopyDeviceFailure{CompanyID: btoi(k[:8]), DeviceID: btoi(k[8:]), Failure: list[i]}); err != nil {
				return err
			}
		}
		return nil
	})
}

func dumpPools(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	turns := tx.Bucket(bucketPoolTurns)
	return eachRecord(tx, bucketPools, func(k []byte, p Pool) error {
		var turn uint64
		if v := turns.Get(k); len(v) == 8 {
			turn = btoi(v)
		}
		return put(store.CopyPool{Pool: p, Turn: turn})
	})
}

// dumpSticky gives the sticky entries: company id + pool id + phone ->
// device id, written at (unix ns), slot.
func dumpSticky(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketPoolSticky).ForEach(func(k, v []byte) error {
		if len(k) < 16 || len(v) < 16 {
			return fmt.Errorf("%s: malformed entry %x", bucketPoolSticky, k)
		}
		return put(store.CopySticky{CompanyID: btoi(k[:8]), PoolID: btoi(k[8:16]), Phone: string(k[16:]),
			DeviceID: btoi(v[:8]), WrittenAt: time.Unix(0, int64(btoi(v[8:16]))).UTC(), SIMSlot: string(v[16:])})
	})
}

// simKeyParts splits a key of simKey: company, device, slot and what
// follows the slot's zero byte.
func simKeyParts(bucket, k []byte) (companyID, deviceID uint64, slot string, rest []byte, err error) {
	if len(k) < 17 {
		return 0, 0, "", nil, fmt.Errorf("%s: malformed key %x", bucket, k)
	}
	s, rest, ok := bytes.Cut(k[16:], []byte{0})
	if !ok {
		return 0, 0, "", nil, fmt.Errorf("%s: malformed key %x", bucket, k)
	}
	return btoi(k[:8]), btoi(k[8:16]), string(s), rest, nil
}

func dumpSIMCaps(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketSIMCaps, func(k []byte, caps SIMCaps) error {
		cid, dev, slot, _, err := simKeyParts(bucketSIMCaps, k)
		if err != nil {
			return err
		}
		return put(store.CopySIMCaps{CompanyID: cid, DeviceID: dev, Slot: slot, Caps: caps})
	})
}

// stamp reads a yyyymmdd or yyyymm stamp of the SIM counts.
func stamp(b []byte) (int32, error) {
	n, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil || (len(b) != 8 && len(b) != 6) {
		return 0, fmt.Errorf("malformed stamp %q", b)
	}
	return int32(n), nil
}

// dumpSIMCounts gives the SIMs' counts (sim_usage: 'd' or 'r' and a day,
// or 'm' and a month), their recipients of a day and their carrier
// failure streaks.
func dumpSIMCounts(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	if err := tx.Bucket(bucketSIMUsage).ForEach(func(k, v []byte) error {
		cid, dev, slot, rest, err := simKeyParts(bucketSIMUsage, k)
		if err != nil {
			return err
		}
		if len(rest) < 1 || len(v) != 8 {
			return fmt.Errorf("%s: malformed entry %x", bucketSIMUsage, k)
		}
		period, err := stamp(rest[1:])
		if err != nil {
			return fmt.Errorf("%s %x: %w", bucketSIMUsage, k, err)
		}
		return put(store.CopySIMUsage{CompanyID: cid, DeviceID: dev, Slot: slot, Kind: rest[0], Period: period, N: int64(btoi(v))})
	}); err != nil {
		return err
	}
	if err := tx.Bucket(bucketSIMRecip).ForEach(func(k, _ []byte) error {
		cid, dev, slot, rest, err := simKeyParts(bucketSIMRecip, k)
		if err != nil {
			return err
		}
		if len(rest) < 8 {
			return fmt.Errorf("%s: malformed key %x", bucketSIMRecip, k)
		}
		day, err := stamp(rest[:8])
		if err != nil {
			return fmt.Errorf("%s %x: %w", bucketSIMRecip, k, err)
		}
		return put(store.CopySIMRecipient{CompanyID: cid, DeviceID: dev, Slot: slot, Day: day, Phone: string(rest[8:])})
	}); err != nil {
		return err
	}
	return tx.Bucket(bucketSIMStreak).ForEach(func(k, v []byte) error {
		cid, dev, slot, _, err := simKeyParts(bucketSIMStreak, k)
		if err != nil {
			return err
		}
		if len(v) != 16 {
			return fmt.Errorf("%s: malformed entry %x", bucketSIMStreak, k)
		}
		return put(store.CopySIMStreak{CompanyID: cid, DeviceID: dev, Slot: slot, N: int64(btoi(v[:8])), LastAt: time.Unix(0, int64(btoi(v[8:]))).UTC()})
	})
}

func dumpAgentNumbers(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return eachRecord(tx, bucketAgentNumbers, func(_ []byte, n AgentNumber) error {
		return put(store.CopyAgentNumber{Number: n})
	})
}

// dumpAgentSends gives the accepted sends: company(8) number id(8)
// created_at(8, unix ns) message id(8).
func dumpAgentSends(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	return tx.Bucket(bucketAgentSends).ForEach(func(k, _ []byte) error {
		if len(k) != 32 {
			return fmt.Errorf("%s: malformed key %x", bucketAgentSends, k)
		}
		return put(store.CopyAgentSend{CompanyID: btoi(k[:8]), NumberID: btoi(k[8:16]), SentAt: time.Unix(0, int64(btoi(k[16:24]))).UTC(), MessageID: btoi(k[24:])})
	})
}

// dumpAgentMessages gives the WhatsApp and iMessage messages, through
// their numbers' index: company(8) number id(8) message id(8).
func dumpAgentMessages(tx *bolt.Tx, put func(store.CopyRecord) error) error {
	msgs := tx.Bucket(bucketMessages)
	return tx.Bucket(bucketAgentMessages).ForEach(func(k, _ []byte) error {
		if len(k) != 24 {
			return fmt.Errorf("%s: malformed key %x", bucketAgentMessages, k)
		}
		var m Message
		if err := getJSON(msgs, k[16:], &m); err != nil {
			return fmt.Errorf("agent message %d: %w", btoi(k[16:]), err)
		}
		return put(store.CopyMessage{Message: m})
	})
}
