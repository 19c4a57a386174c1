package postgres

// Many messages in one transaction: EnqueueBulk's sends, all or none, and
// ImportMessages' finished history.

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// EnqueueBulk stores many outbound messages of one company (ms[0]'s) for
// the device ms[0] names, each with its own phone, text and uuid, in one
// transaction: all of them or, on any refusal, none. The plan's message
// limit counts each message, the budget their sum, and an opted-out
// recipient refuses the whole request with an *store.OptOutError naming
// its index. With an idempotency key, the key's first answer comes back
// instead as prior. answer builds the response from the stored messages,
// in input order.
func (s *Store) EnqueueBulk(ms []store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func([]store.Message) (int, []byte)) ([]store.Message, *store.Idempotent, error) {
	if len(ms) == 0 {
		return nil, nil, errors.New("store: bulk enqueue of no messages")
	}
	var out []store.Message
	var prior *store.Idempotent
	companyID := ms[0].CompanyID
	err := s.write("bulk enqueue", func(t *txn) error {
		out, prior = nil, nil
		at := now().UTC()
		ik, p, err := priorAnswer(t, companyID, idemKey, at)
		if err != nil || p != nil {
			prior = p
			return err
		}
		routed := make([]store.Message, len(ms))
		copy(routed, ms)
		for i := range routed {
			routed[i].CompanyID = companyID
		}
		facts, err := s.readSendFacts(t, companyID, routed, at)
		if err != nil {
			return err
		}
		d, r, err := route(t, &routed[0], check, at, recipients(routed))
		if err != nil {
			return err
		}
		devs := make([]uint64, len(ms))
		devs[0] = d.ID
		for i := 1; i < len(routed); i++ {
			di, err := r.next(&routed[i])
			if err != nil {
				return err
			}
			devs[i] = di.ID
		}
		var cost int64
		for i, m := range routed {
			if err := facts.optOut(m, i); err != nil {
				return err
			}
			cost += store.MessageCost(m)
		}
		usage, err := planAllowsUnder(t, companyID, facts.limits, store.LimitMessages)
		if err != nil {
			return err
		}
		if err := usage.room(int64(len(ms))); err != nil {
			return err
		}
		if err := s.addUsed(t, companyID, at, cost, facts.stored, true); err != nil {
			return err
		}
		if err := usage.add(t, int64(len(ms))); err != nil {
			return err
		}
		if err := r.commit(); err != nil {
			return err
		}
		ids, err := nextIDs(t, "messages", len(routed))
		if err != nil {
			return err
		}
		for i := range routed {
			newOutbound(&routed[i], devs[i], at)
			routed[i].ID = ids[i]
		}
		if err := queueAllIn(t, routed); err != nil {
			return err
		}
		if err := insertOutbound(t, routed); err != nil {
			return err
		}
		if err := ik.keep(t, at, func() (int, []byte) { return answer(routed) }); err != nil {
			return err
		}
		out = routed
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, prior, nil
}

// ImportMessages stores finished history (delivered, failed or received
// messages, with their UUIDs and times set) in one transaction, counting
// them in the stats as they stand. Device names the fingerprint of a live
// device of the message's company, whose id the message takes; any other
// is store.ErrDeviceGone and nothing is stored. IDs and DeviceIDs are set
// in msgs.
func (s *Store) ImportMessages(msgs []store.Message) error {
	type devName struct {
		companyID   uint64
		fingerprint string
	}
	if len(msgs) == 0 {
		return nil
	}
	return s.write("import messages", func(t *txn) error {
		devs := map[devName]uint64{}
		for _, m := range msgs {
			name := devName{m.CompanyID, m.Device}
			if devs[name] == 0 {
				d, err := liveDevice(t, m.CompanyID, m.Device, false)
				if err != nil {
					return fmt.Errorf("message %s: device %s: %w", m.UUID, m.Device, err)
				}
				devs[name] = d.ID
			}
		}
		ids, err := nextIDs(t, "messages", len(msgs))
		if err != nil {
			return err
		}
		// The rows go in one COPY, not one INSERT each: a row's statement
		// cost its round trip's share and a run of the conversations'
		// statement trigger (messages_conversation_insert), which summed one
		// row a run; and the counts of one counter row go as one sum.
		type counter struct {
			company, device, user uint64
			day                   int32
			channel               string
		}
		type sum struct {
			m  int       // the first message counted, which names the row
			at time.Time // and its time
			c  store.Counts
		}
		var sums []sum
		row := map[counter]int{}
		rows := make([][]any, len(msgs))
		for i := range msgs {
			m := &msgs[i]
			m.ID, m.DeviceID = ids[i], devs[devName{m.CompanyID, m.Device}]
			args, err := sendArgs(*m)
			if err != nil {
				return err
			}
			rows[i] = args
			at, c := m.CreatedAt, store.Counts{Received: 1}
			if m.Direction != store.Inbound {
				if at = m.UpdatedAt; at.IsZero() {
					at = m.CreatedAt
				}
				c = store.StatusCounts(*m, store.MsgQueued, m.Status)
			}
			if c.IsZero() {
				continue
			}
			k := counter{m.CompanyID, m.DeviceID, store.MessageUser(*m), day(at), m.Channel}
			j, ok := row[k]
			if !ok {
				j = len(sums)
				row[k] = j
				sums = append(sums, sum{m: i, at: at})
			}
			sums[j].c.Add(c)
		}
		if _, err := t.copyFrom(pgx.Identifier{"messages"}, sendColumnNames, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, sm := range sums {
			b.Queue(countSQL, countArgs(msgs[sm.m], sm.at, shard(), sm.c)...)
		}
		return t.sendBatch(b)
	})
}

// recipients are the phones of ms, each once, in the order they come.
func recipients(ms []store.Message) []string {
	seen := make(map[string]bool, len(ms))
	var out []string
	for _, m := range ms {
		if !seen[m.Phone] {
			seen[m.Phone] = true
			out = append(out, m.Phone)
		}
	}
	return out
}
