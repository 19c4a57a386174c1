package sms

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
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
	SIMSlot        string
	SendAt         string
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
	if utf8.RuneCountInString(in.IdempotencyKey.Key) > maxIdempotencyKey {
		return nil, nil, problem.Invalid("Idempotency-Key", "must be at most 255 characters")
	}
	if strings.TrimSpace(in.Device) == "" {
		return nil, nil, problem.Invalid("device_fingerprint", "is required")
	}
	slot := in.SIMSlot
	if slot == "" {
		slot = proto.SIM1
	}
	if slot != proto.SIM1 && slot != proto.SIM2 {
		return nil, nil, problem.Invalid("sim_slot", "must be SIM1 or SIM2")
	}
	now := s.now()
	sendAt, err := parseSendAt(in.SendAt, "send_at", now)
	if err != nil {
		return nil, nil, err
	}
	if len(in.Messages) == 0 || len(in.Messages) > MaxBulk {
		return nil, nil, problem.Invalid("messages", fmt.Sprintf("must hold 1 to %d messages", MaxBulk))
	}
	expires := ttlStart(now, sendAt).Add(s.cfg.MessageTTL).UTC()
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
		if utf8.RuneCountInString(it.Message) > MaxMessageChars {
			return nil, nil, problem.Invalid(at+".message", "must be at most 1600 characters")
		}
		ms[i] = store.Message{
			UUID: newID(), CompanyID: in.CompanyID, UserID: in.UserID, Device: in.Device, Channel: proto.ChannelSMS,
			Phone: to, Text: it.Message, SIMSlot: slot, Segments: Segments(it.Message), SendAt: sendAt, ExpiresAt: expires,
		}
	}
	out, prior, err := s.store.EnqueueBulk(ms, in.IdempotencyKey, s.now, slotCheck(slot), answer)
	switch {
	case errors.Is(err, store.ErrOptedOut):
		return nil, nil, optedOut(err)
	case errors.Is(err, store.ErrDeviceGone):
		return nil, nil, &problem.Error{Code: problem.NotFound, Field: "device_fingerprint", Message: "No such device."}
	case errors.Is(err, store.ErrDeviceDisabled):
		return nil, nil, problem.New(problem.DeviceDisabled, "The device is disabled; enable it to send through it.")
	case err != nil:
		return nil, nil, budgetRefusal(err, s.now())
	}
	if prior == nil {
		s.queued(out[0])
		for _, m := range out {
			s.changed(m)
		}
	}
	return out, prior, nil
}
