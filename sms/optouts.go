package sms

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// MaxOptOutPage is the most entries one read of the opt-out list returns.
const MaxOptOutPage = 1000

// OptOuts returns one page of the company's opt-out list, in number order,
// after the entry after ("" for the first page).
func (s *Service) OptOuts(_ context.Context, companyID uint64, after string, limit int) ([]store.OptOut, error) {
	if limit < 1 || limit > MaxOptOutPage {
		return nil, problem.OutOfRange("limit", 1, MaxOptOutPage)
	}
	if after != "" {
		n, err := listedForm(after, "", "after")
		if err != nil {
			return nil, err
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
	region, err := s.region(companyID)
	if err != nil {
		return store.OptOut{}, false, err
	}
	to, err := numplan.Normalize(number, region)
	if err != nil {
		return store.OptOut{}, false, problem.Invalid("phone", err.Error())
	}
	o, created, err := s.store.AddOptOut(companyID, to, s.now())
	if err != nil {
		return o, false, budgetRefusal(err, s.now())
	}
	return o, created, nil
}

// RemoveOptOut takes a number off the company's list. It names the entry
// as a send names a recipient (E.164, normalised), or exactly as the list
// shows it: a keyword entry whose sender is no number (a short code, a
// name) is listed as the phone reported it and is removed by that form,
// even once the company's region reads that form as a number.
func (s *Service) RemoveOptOut(_ context.Context, companyID uint64, number string) error {
	if strings.TrimSpace(number) == "" { // spaces alone name no entry: every entry is trimmed
		return problem.Invalid("phone", "is required")
	}
	region, err := s.region(companyID)
	if err != nil {
		return err
	}
	entry, err := listedForm(number, region, "phone")
	if err != nil {
		return err
	}
	err = s.store.RemoveOptOut(companyID, entry)
	if errors.Is(err, store.ErrNotFound) && entry != number {
		// An entry listed as its phone reported the sender, then no
		// number, may read as one in a region the company chose since
		// (07400123456 once it is GB's +447400123456): the form the list
		// shows still names it.
		err = s.store.RemoveOptOut(companyID, number)
	}
	if errors.Is(err, store.ErrNotFound) {
		return problem.New(problem.NotFound, "The number is not on the opt-out list.")
	} else if err != nil {
		return err
	}
	return nil
}

// CheckOptOut answers what a send to number would answer for its place on
// the company's opt-out list: the same RecipientOptedOut problem, or nil
// when it is not listed. A send checks the list again in its own commit
// (an opt-out may arrive in between); this is for a caller that learns the
// recipient before the message, as a mail's RCPT does (docs/email.md), and
// can refuse that one recipient alone.
func (s *Service) CheckOptOut(_ context.Context, companyID uint64, number string) error {
	region := ""
	if !strings.HasPrefix(strings.TrimSpace(number), "+") {
		var err error
		if region, err = s.region(companyID); err != nil {
			return err
		}
	}
	to, err := numplan.Normalize(number, region)
	if err != nil {
		return problem.Invalid("phone", err.Error())
	}
	listed, err := s.store.OptedOut(companyID, to)
	if err != nil {
		return fmt.Errorf("opt-out of %s: %w", to, err)
	}
	if listed {
		return optedOut(&store.OptOutError{Phone: to, Index: -1})
	}
	return nil
}

// listedForm reads an entry of the list as a request names it: an E.164
// number (spaces, dashes and brackets allowed; a national one in the
// company's region) in its normalised form, and any other name an entry can
// have (a keyword sender that is no number) exactly as given.
func listedForm(v, region, field string) (string, error) {
	if len(v) > maxSender {
		return "", problem.Invalid(field, "must be an E.164 number such as +14155550100, or an entry exactly as the list shows it")
	}
	if n, err := numplan.Normalize(v, region); err == nil {
		return n, nil
	}
	return v, nil
}
