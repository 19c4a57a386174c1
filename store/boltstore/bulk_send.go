package boltstore

import (
	"github.com/simrelay/simrelay/store"

	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// EnqueueBulk stores many outbound messages for one device (ms[0].Device
// names it), or through one pool (ms[0].Pool names it: each message gets
// the member the pool picks for it), each with its own phone, text and
// uuid, in one transaction:
// all of them or, on any refusal, none. The plan's message limit counts
// each message, the storage budget their sum, and an opted-out recipient
// refuses the whole request with an *OptOutError naming its index. With an
// idempotency key, the key's first answer comes back instead as prior.
// check vets the device as Enqueue's does; answer builds the response from
// the stored messages, in input order.
func (s *Store) EnqueueBulk(ms []Message, idemKey IdempotencyKey, now func() time.Time, check DeviceCheck, answer func([]Message) (int, []byte)) ([]Message, *Idempotent, error) {
	if len(ms) == 0 {
		return nil, nil, fmt.Errorf("store: bulk enqueue of no messages")
	}
	var out []Message
	var prior *Idempotent
	companyID := ms[0].CompanyID
	err := s.grouped(func(tx *bolt.Tx) error {
		out, prior = nil, nil
		var ik answerKey
		if ik, prior = priorAnswer(tx, companyID, idemKey, now()); prior != nil {
			return nil
		}
		routed := slices.Clone(ms)
		d, placed, err := route(tx, nil, &routed[0], check, now())
		if err != nil {
			return err
		}
		if err := d.refused; err != nil {
			return refuse(err)
		}
		devs := make([]uint64, len(ms))
		devs[0] = d.ID
		for i := 1; i < len(routed); i++ {
			di, err := placed.next(&routed[i])
			if err != nil {
				return err
			}
			if err := di.refused; err != nil {
				return refuse(err)
			}
			devs[i] = di.ID
		}
		var cost int64
		for i, m := range routed {
			if err := s.optedOutTx(tx, companyID, m.Channel, m.Phone, i); err != nil {
				return refuse(err)
			}
			cost += store.MessageCost(m)
		}
		at := now().UTC()
		usage, err := s.planAllows(tx, companyID, at, store.LimitMessages)
		if err == nil {
			err = s.planAllowsMore(tx, companyID, at, usage, len(ms))
		}
		if err != nil {
			if errors.As(err, new(*PlanLimitError)) {
				return refuse(err) // nothing written yet
			}
			return err
		}
		if err := s.charge(tx, companyID, at, cost); err != nil {
			if errors.As(err, new(*BudgetError)) {
				return refuse(err)
			}
			return err
		}
		if err := tx.Bucket(bucketPlanUsage).Put(usage.key, itob(usage.used+uint64(len(ms)))); err != nil {
			return err
		}
		if err := placed.commit(); err != nil {
			return err
		}
		stored := make([]Message, len(ms))
		for i, m := range routed {
			id, err := tx.Bucket(bucketMessages).NextSequence()
			if err != nil {
				return err
			}
			m.ID, m.CompanyID, m.DeviceID, m.Direction, m.Status = id, companyID, devs[i], Outbound, MsgQueued
			if !m.SendAt.IsZero() {
				m.Status = MsgScheduled
			}
			m.CreatedAt, m.UpdatedAt = at, at
			if err := insertMessage(tx, &m); err != nil {
				return err
			}
			if err := placeOutbound(tx, m); err != nil {
				return err
			}
			stored[i] = m
		}
		if err := ik.keep(tx, at, func() (int, []byte) { return answer(stored) }); err != nil {
			return err
		}
		out = stored
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: bulk enqueue: %w", err)
	}
	return out, prior, nil
}

// planAllowsMore refuses n messages that would take the period's counter
// (usage, which has room for one) over the plan's limit: all or none.
func (s *Store) planAllowsMore(tx *bolt.Tx, companyID uint64, now time.Time, usage usageSlot, n int) error {
	l, err := s.limitsTx(tx, companyID, now)
	if err != nil {
		return err
	}
	if l.Messages >= 0 && int64(usage.used)+int64(n) > l.Messages {
		return &PlanLimitError{What: store.LimitMessages, Limit: l.Messages, PeriodEnd: l.PeriodEnd, Used: int64(usage.used), Asked: int64(n)}
	}
	return nil
}
