package sms

import (
	"context"
	"errors"

	"github.com/simrelay/simrelay/phone"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// MaxOptOutPage is the most entries one read of the opt-out list returns.
const MaxOptOutPage = 1000

// OptOuts returns one page of the company's opt-out list, in number order,
// after the number after ("" for the first page).
func (s *Service) OptOuts(_ context.Context, companyID uint64, after string, limit int) ([]store.OptOut, error) {
	if limit < 1 || limit > MaxOptOutPage {
		return nil, problem.Invalid("limit", "must be from 1 to 1000")
	}
	if after != "" {
		n, err := phone.Normalize(after)
		if err != nil {
			return nil, problem.Invalid("after", err.Error())
		}
		after = n
	}
	return s.store.OptOuts(companyID, after, limit)
}

// AddOptOut puts a number on the company's list; created is false when it
// was on it already.
func (s *Service) AddOptOut(_ context.Context, companyID uint64, number string) (store.OptOut, bool, error) {
	if number == "" {
		return store.OptOut{}, false, problem.Invalid("phone", "is required")
	}
	to, err := phone.Normalize(number)
	if err != nil {
		return store.OptOut{}, false, problem.Invalid("phone", err.Error())
	}
	o, created, err := s.store.AddOptOut(companyID, to, s.now())
	if err != nil {
		return o, false, budgetRefusal(err, s.now())
	}
	return o, created, nil
}

// RemoveOptOut takes a number off the company's list.
func (s *Service) RemoveOptOut(_ context.Context, companyID uint64, number string) error {
	to, err := phone.Normalize(number)
	if err != nil {
		return problem.Invalid("phone", err.Error())
	}
	if err := s.store.RemoveOptOut(companyID, to); errors.Is(err, store.ErrNotFound) {
		return problem.New(problem.NotFound, "The number is not on the opt-out list.")
	} else if err != nil {
		return err
	}
	return nil
}
