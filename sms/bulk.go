package sms

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/smsparts"
	"github.com/simrelay/simrelay/internal/visible"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/window"
)

// MaxBulk is how many messages one bulk send takes: a campaign's worth for
// a handful of phones, and about 2 MB of text at most, which one commit
// writes in well under a second.
const MaxBulk = 1000

// BulkItem is one message of a bulk send.
type BulkItem struct {
	Phone   string
	Message string
}

// BulkInput is one bulk send request: one device, one slot, one send_at.
type BulkInput struct {
	CompanyID      uint64
	UserID         uint64
	Device         string
	Pool           string // in place of Device (docs/routing.md)
	SIMSlot        string
	SendAt         string
	Window         *window.Window // as SendInput's, for every message
	ExpiresAt      string
	Validity       *int64
	Priority       int
	Messages       []BulkItem
	IdempotencyKey store.IdempotencyKey // keys are scoped by company and route
}

// BulkAnswer builds the HTTP answer of a stored bulk send (kept with an
// idempotency key, as Answer).
type BulkAnswer func([]store.Message) (status int, body []byte)

// SendBulk validates every message before storing any, then stores them all
// in one durable commit or none (plan limit, storage budget, an opted-out
// recipient), and wakes the device's link once.
func (s *Service) SendBulk(_ context.Context, in BulkInput, answer BulkAnswer) ([]store.Message, *store.Idempotent, error) {
	if err := checkIdempotencyKey(in.IdempotencyKey.Key); err != nil {
		return nil, nil, err
	}
	slot, err := routeInput(in.Device, in.Pool, in.SIMSlot)
	if err != nil {
		return nil, nil, err
	}
	now := s.now()
	sendAt, err := parseSendAt(in.SendAt, "send_at", now)
	if err != nil {
		return nil, nil, err
	}
	if len(in.Messages) == 0 || len(in.Messages) > MaxBulk {
		return nil, nil, problem.Invalid("messages", fmt.Sprintf("must hold 1 to %d messages", MaxBulk))
	}
	if err := sendWindow(in.Window); err != nil {
		return nil, nil, err
	}
	expires, fixed, err := s.expiry(now, sendAt, in.Window, in.ExpiresAt, in.Validity)
	if err != nil {
		return nil, nil, err
	}
	if err := sendPriority(in.Priority); err != nil {
		return nil, nil, err
	}
	region, err := s.region(in.CompanyID)
	if err != nil {
		return nil, nil, err
	}
	ms := make([]store.Message, len(in.Messages))
	for i, it := range in.Messages {
		at := fmt.Sprintf("messages[%d]", i)
		if it.Phone == "" {
			return nil, nil, problem.Invalid(at+".phone", "is required")
		}
		to, err := numplan.Normalize(it.Phone, region)
		if err != nil {
			return nil, nil, problem.Invalid(at+".phone", err.Error())
		}
		if it.Message == "" {
			return nil, nil, problem.Invalid(at+".message", "is required")
		}
		if visible.None(it.Message) {
			return nil, nil, problem.Invalid(at+".message", visible.FaultMessage)
		}
		if utf8.RuneCountInString(it.Message) > MaxMessageChars {
			return nil, nil, problem.Invalid(at+".message", "must be at most 1600 characters")
		}
		if strings.IndexByte(it.Message, 0) >= 0 {
			return nil, nil, errNUL(at + ".message")
		}
		ms[i] = store.Message{
			UUID: newID(), CompanyID: in.CompanyID, UserID: in.UserID, Device: in.Device, Pool: in.Pool, Channel: proto.ChannelSMS,
			Phone: to, Text: it.Message, SIMSlot: slot, Segments: smsparts.Count(it.Message), SendAt: sendAt, ExpiresAt: expires,
			ExpiresFixed: fixed, Window: in.Window, Priority: in.Priority,
		}
	}
	out, prior, err := s.store.EnqueueBulk(ms, in.IdempotencyKey, s.now, slotCheck, answer)
	if err != nil {
		return nil, nil, s.enqueueRefusal(err)
	}
	if prior == nil {
		s.announce(out...)
	}
	return out, prior, nil
}
