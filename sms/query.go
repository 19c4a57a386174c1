package sms

import (
	"context"
	"errors"
	"math"
	"strings"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// History paging limits of the spec.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 100
	// InboundListSize is the spec's "newest 50".
	InboundListSize = 50
	// MaxConversations bounds one list of a device's conversations, the
	// newest first: a device that wrote to a hundred thousand numbers
	// would otherwise answer them all at once (megabytes of JSON, and as
	// much held in memory to write it). An older conversation is still
	// read by its number (History). The store also ends a list at
	// store.ConversationsText bytes of last messages.
	MaxConversations = 1000
)

// Queued returns one outbound message of the company by its queue id.
func (s *Service) Queued(_ context.Context, companyID uint64, queueID string) (store.Message, error) {
	m, err := s.store.MessageByUUID(companyID, store.CanonicalUUID(queueID))
	// WhatsApp and iMessage sends are read at their own routes.
	if errors.Is(err, store.ErrNotFound) || err == nil && (m.Direction != store.Outbound || store.IsAgentChannel(m.Channel)) {
		return m, problem.New(problem.NotFound, "No queued message with this id.")
	}
	return m, err
}

var errNoDevice = &problem.Error{Code: problem.NotFound, Field: "device_fingerprint", Message: "No such device."}

// deviceRequired checks that a query names a device; the store checks, in
// the transaction of the read, that it is the company's.
func deviceRequired(fingerprint string) error {
	if fingerprint == "" {
		return problem.Invalid("device_fingerprint", "is required")
	}
	return nil
}

// Page is one page of history.
type Page struct {
	Messages []store.Message
	Total    int
	Page     int
	Pages    int
}

// History returns a page of one device's exchange with one number, newest first.
func (s *Service) History(_ context.Context, companyID uint64, device, number string, page, limit int) (Page, error) {
	if err := deviceRequired(device); err != nil {
		return Page{}, err
	}
	region, err := s.region(companyID)
	if err != nil {
		return Page{}, err
	}
	n, badNumber := historyNumber(number, region)
	if page < 1 {
		return Page{}, problem.OutOfRange("page", 1, math.MaxInt)
	}
	if limit < 1 || limit > MaxPageLimit {
		return Page{}, problem.OutOfRange("limit", 1, MaxPageLimit)
	}
	if badNumber != nil {
		// A phone stores a sender it could not read as E.164 as it came
		// (national formats such as 07911123456): such a conversation is
		// found as written. Anything else is the number rule's 400.
		msgs, total, err := s.store.History(companyID, device, strings.TrimSpace(number), page, limit)
		switch {
		case err == nil && total == 0, errors.Is(err, store.ErrDeviceGone):
			return Page{}, badNumber
		case err != nil:
			return Page{}, err // the store's failure (503), not the number's
		}
		return Page{Messages: msgs, Total: total, Page: page, Pages: pages(total, limit)}, nil
	}
	if raw := strings.TrimSpace(number); region != "" && raw != n && !strings.HasPrefix(raw, "+") {
		// A national sender the phone reported while the company had no
		// region is stored as written, and listed so: the form the list
		// shows opens that conversation, though the region reads it as a
		// number now (whose own conversation its E.164 form opens).
		msgs, total, err := s.store.History(companyID, device, raw, page, limit)
		switch {
		case errors.Is(err, store.ErrDeviceGone):
			return Page{}, errNoDevice
		case err != nil:
			return Page{}, err
		case total > 0:
			return Page{Messages: msgs, Total: total, Page: page, Pages: pages(total, limit)}, nil
		}
	}
	msgs, total, err := s.store.History(companyID, device, n, page, limit)
	if errors.Is(err, store.ErrDeviceGone) {
		return Page{}, errNoDevice
	}
	if err != nil {
		return Page{}, err
	}
	return Page{Messages: msgs, Total: total, Page: page, Pages: pages(total, limit)}, nil
}

// pages is how many pages of limit items total items fill.
func pages(total, limit int) int { return (total + limit - 1) / limit }

// historyNumber reads the other party of a history query. A number follows
// the rule of every phone input: E.164 after normalising, and no leading +
// is refused, since the server does not guess a country (a client that
// forgot it would otherwise get an empty history, not an error). A sender
// that cannot be a number, a name such as "BANK" or a short code of fewer
// than 8 digits, is stored as the phone gave it and is matched as written;
// so is any other value when a conversation exists under it (History).
// In the company's region a national number is read as a send reads it,
// after a conversation stored under exactly the value written (History).
func historyNumber(number, region string) (string, error) {
	number = strings.TrimSpace(number)
	switch {
	case number == "":
		return "", problem.Invalid("phone", "is required")
	case strings.HasPrefix(number, "+") || region != "" && !senderName(number):
		n, err := numplan.Normalize(number, region)
		if err != nil {
			return "", problem.Invalid("phone", err.Error())
		}
		return n, nil
	case senderName(number):
		return number, nil
	}
	return "", problem.Invalid("phone", "must start with + and the country code (in a query string, send + as %2B)")
}

// senderName reports whether s is a sender that is not a phone number: it
// has a character no number has, or too few digits for E.164.
func senderName(s string) bool {
	digits := 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r == ' ' || r == '-' || r == '.' || r == '(' || r == ')':
		default:
			return true
		}
	}
	return digits < 8
}

// Conversations lists a device's conversations, the latest first: at most
// limit of them, 1 to MaxConversations, and fewer when their last messages
// reach store.ConversationsText bytes.
func (s *Service) Conversations(_ context.Context, companyID uint64, device string, limit int) ([]store.Conversation, error) {
	if err := deviceRequired(device); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxConversations {
		return nil, problem.OutOfRange("limit", 1, MaxConversations)
	}
	convs, err := s.store.Conversations(companyID, device, limit)
	if errors.Is(err, store.ErrDeviceGone) {
		return nil, errNoDevice
	}
	return convs, err
}

// InboundList returns the newest inbound messages, newest first, optionally
// of one device and SIM slot. A device of another company matches nothing.
func (s *Service) InboundList(_ context.Context, companyID uint64, device, slot string, limit int) ([]store.Message, error) {
	if slot != "" && !proto.IsSIMSlot(slot) {
		return nil, problem.Invalid("sim_slot", "must be SIM1 or SIM2")
	}
	msgs, err := s.store.InboundList(store.InboundQuery{CompanyID: companyID, Device: device, SIMSlot: slot, Limit: limit})
	if errors.Is(err, store.ErrDeviceGone) {
		return nil, nil
	}
	return msgs, err
}
