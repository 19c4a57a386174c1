package postgres

// The company's opt-out list: the refusal a send to a number on it meets,
// and the list's own reads and writes.

import (
	"errors"
	"time"

	"github.com/simrelay/simrelay/store"
)

// optOutRefusal refuses an SMS (channel sms or unset) to a number on the
// company's list with an *store.OptOutError naming index (-1 for a single
// send); other channels are not SMS and pass.
func optOutRefusal(t *txn, companyID uint64, channel, phone string, index int) error {
	if channel != "" && channel != "sms" {
		return nil
	}
	listed, err := onOptOutList(t, companyID, phone)
	if err != nil {
		return err
	}
	if listed {
		return &store.OptOutError{Phone: phone, Index: index}
	}
	return nil
}

// onOptOutList says whether phone is on the company's list.
func onOptOutList(t *txn, companyID uint64, phone string) (listed bool, err error) {
	err = t.row("SELECT EXISTS (SELECT 1 FROM opt_outs WHERE company_id = $1 AND phone = $2)", id(companyID), phone).Scan(&listed)
	return listed, err
}

// AddOptOut puts phone (E.164) on the company's list, counting it against
// the daily budget; created is false when it was there already (and the
// stored entry comes back unchanged, costing nothing). An entry removed
// while the add runs is added again, as after the removal.
func (s *Store) AddOptOut(companyID uint64, phone string, now time.Time) (o store.OptOut, created bool, err error) {
	err = s.write("add opt-out", func(t *txn) error {
		o, created = store.OptOut{Phone: phone, Source: store.OptOutAPI, CreatedAt: now.UTC()}, true
		if err := companyOpen(t, companyID); err != nil {
			return err
		}
		raw, err := rec(o)
		if err != nil {
			return err
		}
		tag, err := t.exec("INSERT INTO opt_outs (company_id, phone, rec) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", id(companyID), phone, raw)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			created = false
			err := getRec(t, &o, "SELECT rec FROM opt_outs WHERE company_id = $1 AND phone = $2", id(companyID), phone)
			if errors.Is(err, store.ErrNotFound) {
				// The entry the insert met was removed since (the insert
				// waits for no lock of a row it leaves alone): add again.
				return errAgain
			}
			return err
		}
		return s.chargeOptOut(t, companyID, now, store.OptOutCost)
	})
	if err != nil {
		return store.OptOut{}, false, err
	}
	return o, created, nil
}

// RemoveOptOut takes phone off the company's list; store.ErrNotFound when
// it is not on it.
func (s *Store) RemoveOptOut(companyID uint64, phone string) error {
	return s.write("remove opt-out", func(t *txn) error {
		tag, err := t.exec("DELETE FROM opt_outs WHERE company_id = $1 AND phone = $2", id(companyID), phone)
		if err == nil && tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		return err
	})
}

// OptOuts returns one page of the company's list in number order (after
// the number after, "" for the first page), at most limit entries.
func (s *Store) OptOuts(companyID uint64, after string, limit int) ([]store.OptOut, error) {
	var out []store.OptOut
	err := s.read("opt-outs", func(t *txn) error {
		var err error
		out, err = getRecs[store.OptOut](t, "SELECT rec FROM opt_outs WHERE company_id = $1 AND phone > $2 ORDER BY phone LIMIT $3",
			id(companyID), after, max(limit, 0))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// OptedOut reports whether phone (E.164, or a keyword sender's form) is on
// the company's list. A send reads the list again in its own transaction;
// this read is for a caller that wants to know before it sends.
func (s *Store) OptedOut(companyID uint64, phone string) (bool, error) {
	var listed bool
	err := s.read("opt-out", func(t *txn) (err error) {
		listed, err = onOptOutList(t, companyID, phone)
		return err
	})
	return listed, err
}
