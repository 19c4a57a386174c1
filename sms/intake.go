package sms

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/smsparts"
	"github.com/simrelay/simrelay/phone"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// The Intake side: what the gateway hands over from phones.

var errNoJob = problem.New(problem.NotFound, "This device has no job with that id.")

// Ack records that the phone durably took a job: it queues the change for
// the store's next group commit and returns at once; the Report's Wait
// says, once the change is durable, whether the job's status moved. dev is
// the device as its link authenticated it: only a job of that registration
// (company and device id) moves, never one of an earlier owner of the
// handset.
func (s *Service) Ack(_ context.Context, dev store.Device, id string) Report {
	// An id longer than any job's (proto.MaxJobIDBytes) names no job, and
	// is refused at once rather than held, up to a frame's 64 KiB, in the
	// store's commit queue until it finds nothing.
	if len(id) > proto.MaxJobIDBytes {
		return Report{err: errNoJob}
	}
	return Report{s: s, t: s.store.TransitionLater(dev.CompanyID, dev.ID, id, store.MsgSending, "", "", "", s.now())}
}

// Status records what became of a job, as Ack does: a report that is not
// valid is refused at once, through the Report's Wait.
func (s *Service) Status(_ context.Context, dev store.Device, st proto.Status) Report {
	switch st.Status {
	case proto.StatusSent, proto.StatusDelivered, proto.StatusFailed:
	default:
		return Report{err: problem.Invalid("status", "must be sent, delivered or failed")}
	}
	if len(st.ID) > proto.MaxJobIDBytes {
		return Report{err: errNoJob}
	}
	st.Error = proto.CutBytes(st.Error, maxErrorBytes)
	if err := checkDetail(st); err != nil {
		return Report{err: err}
	}
	if st.At != "" {
		at, err := ParseTime(st.At)
		if err != nil {
			return Report{err: problem.Invalid("at", "must be an RFC 3339 time such as 2026-11-22T10:04:05.123Z")}
		}
		st.At = at.UTC().Format(timeLayout) // shown like every other time: UTC, milliseconds
	}
	if st.Status == proto.StatusFailed && st.Error == "" {
		st.Error = "failed"
	}
	return Report{s: s, t: s.store.TransitionLater(dev.CompanyID, dev.ID, st.ID, st.Status, st.Error, st.At, st.Detail, s.now())}
}

// Report is a phone's ack or status on its way into the store. Reports a
// link queues one after another are applied in that order.
type Report struct {
	s   *Service
	t   store.Transit // nil when refused before reaching the store
	err error
}

// Wait returns once the report is durable (or refused): moved says the
// job's stored status changed, news a job gives at most once per step.
// Call it once.
func (r Report) Wait() (moved bool, err error) {
	if r.t == nil {
		return false, r.err
	}
	m, moved, err := r.t.Wait()
	if errors.Is(err, store.ErrNotFound) {
		return false, errNoJob
	}
	if err == nil && moved {
		r.s.changed(m)
	}
	return moved, err
}

// checkDetail refuses a detail the protocol does not define (PROTOCOL.md
// 8.5), like any other bad field: a phone that sends one has a bug, and
// storing unknown words would make them part of the API. Whether the
// message's channel keeps it is the store's call (SMS ignores it).
func checkDetail(st proto.Status) error {
	switch {
	case st.Detail == "":
		return nil
	case len(st.Detail) > proto.MaxDetail:
		return problem.Invalid("detail", "must be at most 32 bytes: read or played")
	case st.Status != proto.StatusDelivered:
		return problem.Invalid("detail", "is allowed only with status delivered")
	case st.Detail != proto.DetailRead && st.Detail != proto.DetailPlayed:
		return problem.Invalid("detail", "must be read or played")
	}
	return nil
}

// maxSender bounds an inbound sender, and so every name on the opt-out list.
const maxSender = 64

// ErrInboundDeviceGone refuses an inbound (SMS here, WhatsApp or iMessage
// in package channel) of a device deleted, or of a company closing or
// removed (which takes its devices): error not_found, which the phone
// drops (PROTOCOL.md section 10.2), never a close for a server fault. It
// answers the store's store.ErrDeviceGone and nothing else: any other
// error, store.ErrNotFound of another record included, is the server's.
var ErrInboundDeviceGone = problem.New(problem.NotFound, "The device was deleted.")

// Inbound stores a received SMS once per (device, client_id) and returns the
// acknowledgement to send only after it is durable. The device is the
// registration (company and device id): client_ids a previous owner's
// registration of the same handset used match nothing.
func (s *Service) Inbound(_ context.Context, dev store.Device, in proto.Inbound) (proto.InboundAck, error) {
	if in.ClientID == "" || len(in.ClientID) > proto.MaxClientIDBytes {
		return proto.InboundAck{}, problem.Invalid("client_id", fmt.Sprintf("is required, at most %d bytes of UTF-8", proto.MaxClientIDBytes))
	}
	if in.Channel != proto.ChannelSMS {
		return proto.InboundAck{}, problem.Invalid("channel", "must be sms")
	}
	from := strings.TrimSpace(in.From)
	if from == "" || len(from) > maxSender {
		return proto.InboundAck{}, problem.Invalid("from", "is required, at most 64 bytes of UTF-8")
	}
	// Senders are often short codes or names ("BANK"), which stay as given;
	// numbers are stored in E.164 like everywhere else. In a company's
	// region a national sender ("07400123456" in GB) is a number too.
	// The read is for the region. Its refusal only answers early: a
	// company marked closing after it is refused by the write below
	// (StoreInbound), in its own transaction.
	region, err := s.deviceRegion(dev)
	if errors.Is(err, store.ErrDeviceGone) {
		// The device was deleted, or its company is closing or removed:
		// the link's close is on the way (or, on another node, the link's
		// next look finds it so).
		return proto.InboundAck{}, ErrInboundDeviceGone
	}
	if err != nil {
		return proto.InboundAck{}, err
	}
	if region == "" {
		if n, err := phone.Normalize(from); err == nil {
			from = n
		}
	} else if n, ok := numplan.Sender(from, region); ok {
		from = n
	}
	if !utf8.ValidString(in.Message) {
		return proto.InboundAck{}, problem.Invalid("message", "must be UTF-8")
	}
	if utf8.RuneCountInString(in.Message) > MaxInboundChars {
		return proto.InboundAck{}, errInboundTooLong
	}
	slot := in.SIMSlot
	if slot == "" {
		slot = proto.SIM1
	}
	if !proto.IsSIMSlot(slot) {
		return proto.InboundAck{}, problem.Invalid("sim_slot", "must be SIM1 or SIM2")
	}
	receivedAt := in.ReceivedAt
	if receivedAt == "" {
		receivedAt = s.now().UTC().Format(timeLayout)
	}
	at, err := ParseTime(receivedAt)
	if err != nil {
		return proto.InboundAck{}, problem.Invalid("received_at", "must be an RFC 3339 time such as 2026-11-22T10:04:05.123Z")
	}
	receivedAt = at.UTC().Format(timeLayout) // the phone's clock, shown in UTC with milliseconds
	m := store.Message{
		UUID: newID(), CompanyID: dev.CompanyID, DeviceID: dev.ID, Device: dev.Fingerprint, Channel: proto.ChannelSMS, Phone: from, Text: in.Message,
		SIMSlot: slot, Segments: smsparts.Count(in.Message), ClientID: in.ClientID, ReceivedAt: receivedAt,
	}
	stored, dup, err := s.store.StoreInbound(&m, s.now)
	if errors.Is(err, store.ErrDeviceGone) {
		return proto.InboundAck{}, ErrInboundDeviceGone
	}
	if err != nil {
		return proto.InboundAck{}, budgetRefusal(err, s.now())
	}
	if !dup {
		s.changed(stored)
	}
	return proto.InboundAck{ClientID: in.ClientID, ID: stored.ID, UUID: stored.UUID}, nil
}

// Pending returns the device's next jobs: those with a priority first,
// highest first, from the head of their queue whatever after is (Seq 0),
// then the plain jobs after the one with seq after, oldest first; ones
// whose TTL ended are left for the sweeper to mark expired, and
// ones to a number that opted out since they were queued are failed, and
// ones outside their window held, in the store's next shared commit (the
// store's Pending), which this does not wait for; none of them is sent,
// but its seq still counts, so the caller's cursor moves past it.
func (s *Service) Pending(_ context.Context, dev store.Device, after uint64, limit int) ([]Job, error) {
	now := s.now()
	msgs, err := s.store.Pending(dev.CompanyID, dev.ID, after, limit, now, s.movedAtDispatch)
	if err != nil {
		return nil, err
	}
	out := make([]Job, 0, len(msgs))
	for _, m := range msgs {
		j := Job{Seq: m.QueuePlace()}
		if m.Priority > 0 {
			j.Seq = 0 // outside the plain queue's order: the cursor does not move
		}
		switch {
		case m.Status != store.MsgQueued: // failed in the next commit
		case !m.HeldUntil.IsZero(): // outside its window: held in the next commit
		case m.ExpiresAt.IsZero() || now.Before(m.ExpiresAt):
			j.Send = &proto.Send{ID: m.UUID, Channel: proto.ChannelSMS, To: m.Phone, Message: m.Text, SIMSlot: m.SIMSlot, ExpiresAt: m.ExpiresAt.UTC().Format(timeLayout)}
		}
		out = append(out, j)
	}
	return out, nil
}

// movedAtDispatch hears of the jobs the store failed or held at
// dispatch, after their commit. A held job's opening may come sooner than
// the scheduler sleeps: it looks again.
func (s *Service) movedAtDispatch(ms []store.Message) {
	for _, m := range ms {
		if !m.HeldUntil.IsZero() {
			s.sched.Kick()
		}
		s.changed(m)
	}
}

// Job is a queued message as the hub takes it: its place in the device's
// queue, and its send frame (nil when it must be skipped: expired, held
// outside its window, or failed because its recipient opted out). A job
// with a priority has Seq 0: it is read from the head of the priority
// queue every time, so a link skips those it holds already, and its
// cursor stays where the plain queue is.
type Job struct {
	Seq  uint64
	Send *proto.Send
	// HandedTo, of a WhatsApp or iMessage job, is the registration it was
	// last handed to (store.Message.HandedTo; 0: none, or one since
	// deleted): a link of another device must not write it.
	HandedTo uint64
}

const timeLayout = "2006-01-02T15:04:05.000Z"

// maxErrorBytes is how much of a failed job's error text the phone reports
// is kept: a reason, not a log. The cut falls before the character that
// would cross it (proto.CutBytes), so both stores keep the same text.
const maxErrorBytes = 200
