package sms

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/smsparts"
	"github.com/simrelay/simrelay/internal/visible"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/wakeup"
	"github.com/simrelay/simrelay/window"
)

// Defaults, and why.
const (
	// DefaultMessageTTL is how long a send may wait for its phone (the contract's 24 h).
	DefaultMessageTTL = 24 * time.Hour
	// MaxMessageChars is the contract's limit: ten concatenated parts and some.
	MaxMessageChars = 1600
	// expireEvery is how often queued messages past their TTL are marked expired.
	expireEvery = time.Minute
	// maxIdempotencyKey bounds stored keys; Stripe's limit is 255 too.
	maxIdempotencyKey = 255
)

// errNUL refuses a text holding U+0000. It means nothing in an SMS, and
// PostgreSQL (the store of a cluster) cannot hold it: refused here, every
// way in (the API, the console, e-mail to SMS) answers the sender's clear
// error on either store, where the store would have failed the request.
func errNUL(field string) error {
	return problem.Invalid(field, `must not hold the NUL character (\u0000)`)
}

// Config tunes the service.
type Config struct {
	MessageTTL time.Duration
	// SchedulePoll, when set, is the longest the scheduler sleeps before it
	// reads the next send_at again. On one node 0: every scheduled message
	// is stored by this process, which wakes its scheduler. On a cluster
	// (DefaultClusterSchedulePoll) a message scheduled on another node is
	// released by that node's scheduler, woken by its send; if that node
	// died, every other node finds the message within one poll of its
	// send_at. The store releases each message once (ReleaseDue takes its
	// rows with SKIP LOCKED), whichever nodes look at once.
	SchedulePoll time.Duration
}

// DefaultClusterSchedulePoll is SchedulePoll on a cluster: a scheduled send
// whose node died goes at most this late; each poll is one indexed read.
const DefaultClusterSchedulePoll = 5 * time.Second

// Dispatcher is told when a device has new jobs (gateway.Hub).
type Dispatcher interface {
	Kick(fingerprint string, deviceID uint64)
}

// Watcher hears of every message that was stored or changed, after its
// commit (the console's live updates). It must not block. Changes told
// from different goroutines may reach it in either order (a phone's report
// against the send's own news); a new message is told before its link or
// the scheduler is woken, as released scheduled messages and jobs a
// failover moved are (the whole batch before any link), so an idle link's
// phone reports only after the watcher heard of the queueing (announce).
type Watcher interface {
	MessageChanged(m store.Message)
}

// Service is the SMS domain.
type Service struct {
	cfg      Config
	store    Store
	dispatch Dispatcher
	watch    Watcher
	log      *slog.Logger
	now      func() time.Time
	sched    *wakeup.Signal // wakes the scheduler when a scheduled message is stored (schedule.go)
	// hub, startSeq and started serve the failover sweep (failover.go).
	hub      FailoverHub
	startSeq uint64
	started  time.Time
}

// New returns the service. dispatch may be set later with SetDispatcher, as
// the hub and the service need each other.
func New(cfg Config, st Store, log *slog.Logger, now func() time.Time) *Service {
	if cfg.MessageTTL <= 0 {
		cfg.MessageTTL = DefaultMessageTTL
	}
	return &Service{cfg: cfg, store: st, sched: wakeup.NewSignal(), log: log, now: now}
}

// SetDispatcher wires the hub; call it before serving.
func (s *Service) SetDispatcher(d Dispatcher) { s.dispatch = d }

// SetWatcher wires the listener of message changes; call it before serving.
func (s *Service) SetWatcher(w Watcher) { s.watch = w }

// changed tells the watcher, if any, of a committed change.
func (s *Service) changed(m store.Message) {
	if s.watch != nil {
		s.watch.MessageChanged(m)
	}
}

// SendInput is one send request.
type SendInput struct {
	CompanyID uint64
	UserID    uint64
	Device    string
	// Pool, in place of Device, names the sender pool that chooses the
	// device and SIM (docs/routing.md).
	Pool           string
	Phone          string
	Message        string
	SIMSlot        string
	IdempotencyKey store.IdempotencyKey // keys are scoped by company and route
	// SendAt, when set, schedules the message (RFC 3339, schedule.go).
	SendAt string
	// Window, when set, is when the message may go out; ExpiresAt (RFC
	// 3339) or Validity (seconds) when it expires unless taken (window.go).
	Window    *window.Window
	ExpiresAt string
	Validity  *int64
	// Priority orders the device's queue: higher first (0 to 9, default 0).
	Priority int
}

// checkIdempotencyKey refuses a key that cannot be stored: one over 255
// characters, or one that is not UTF-8 (a header may carry any bytes, and
// PostgreSQL refuses such a text, which was a 500 there).
func checkIdempotencyKey(key string) error {
	if !utf8.ValidString(key) {
		return problem.Invalid("Idempotency-Key", "must be UTF-8 text")
	}
	if utf8.RuneCountInString(key) > maxIdempotencyKey {
		return problem.Invalid("Idempotency-Key", "must be at most 255 characters")
	}
	return nil
}

// Answer builds the HTTP answer of a stored send; it is kept with an
// idempotency key and replayed for the key's repeats.
type Answer func(store.Message) (status int, body []byte)

// Send validates and durably queues one SMS, then wakes the device's link.
// With an idempotency key used before by the company on the route (within
// 24 h), the first answer comes back as prior and nothing new is queued; the
// caller compares prior's Digest with its request's.
func (s *Service) Send(_ context.Context, in SendInput, answer Answer) (msg store.Message, prior *store.Idempotent, err error) {
	if err := checkIdempotencyKey(in.IdempotencyKey.Key); err != nil {
		return msg, nil, err
	}
	slot, err := routeInput(in.Device, in.Pool, in.SIMSlot)
	if err != nil {
		return msg, nil, err
	}
	// A number written with + reads the same in every region: the company's
	// record (every send would decode it) is read for the others only.
	region := ""
	if !strings.HasPrefix(strings.TrimSpace(in.Phone), "+") {
		if region, err = s.region(in.CompanyID); err != nil {
			return msg, nil, err
		}
	}
	to, err := numplan.Normalize(in.Phone, region)
	if in.Phone == "" {
		return msg, nil, problem.Invalid("phone", "is required")
	}
	if err != nil {
		return msg, nil, problem.Invalid("phone", err.Error())
	}
	if in.Message == "" {
		return msg, nil, problem.Invalid("message", "is required")
	}
	if visible.None(in.Message) {
		return msg, nil, problem.Invalid("message", visible.FaultMessage)
	}
	if n := utf8.RuneCountInString(in.Message); n > MaxMessageChars {
		return msg, nil, problem.Invalid("message", "must be at most 1600 characters")
	}
	if strings.IndexByte(in.Message, 0) >= 0 {
		return msg, nil, errNUL("message")
	}
	// The device is vetted inside the commit: one read, and no window in
	// which it could change between the check and the write.
	now := s.now()
	sendAt, err := parseSendAt(in.SendAt, "send_at", now)
	if err != nil {
		return msg, nil, err
	}
	if err := sendWindow(in.Window); err != nil {
		return msg, nil, err
	}
	expires, fixed, err := s.expiry(now, sendAt, in.Window, in.ExpiresAt, in.Validity)
	if err != nil {
		return msg, nil, err
	}
	if err := sendPriority(in.Priority); err != nil {
		return msg, nil, err
	}
	m := store.Message{
		UUID: newID(), CompanyID: in.CompanyID, UserID: in.UserID, Device: in.Device, Pool: in.Pool, Channel: proto.ChannelSMS,
		Phone: to, Text: in.Message, SIMSlot: slot, Segments: smsparts.Count(in.Message), SendAt: sendAt,
		ExpiresAt: expires, ExpiresFixed: fixed, Window: in.Window, Priority: in.Priority,
	}
	msg, prior, err = s.store.Enqueue(&m, in.IdempotencyKey, s.now, slotCheck, answer)
	if err != nil {
		return msg, nil, s.enqueueRefusal(err)
	}
	if prior == nil {
		s.announce(msg)
	}
	return msg, prior, nil
}

// enqueueRefusal is the answer to a send the store refused (err, from
// Enqueue or EnqueueBulk, not nil).
func (s *Service) enqueueRefusal(err error) error {
	if perr := poolRefusal(err); perr != nil {
		return perr
	}
	switch {
	case errors.Is(err, store.ErrOptedOut):
		return optedOut(err)
	case errors.Is(err, store.ErrDeviceGone):
		return &problem.Error{Code: problem.NotFound, Field: "device_fingerprint", Message: "No such device."}
	case errors.Is(err, store.ErrDeviceDisabled):
		return problem.New(problem.DeviceDisabled, "The device is disabled; enable it to send through it.")
	}
	return budgetRefusal(err, s.now())
}

// slotCheck vets a device for a send from slot: the slot must be the one
// the device's selected_sim names (or BOTH), and one of the SIMs the phone
// announced, since the phone could only fail the job later (no_sim). A
// device that announced no SIMs (older clients send none) is not judged by
// them.
func slotCheck(dev store.Device, slot string) error {
	if dev.SelectedSIM != proto.BothSIMs && dev.SelectedSIM != slot {
		return &problem.Error{Code: problem.SIMMismatch, Field: "sim_slot", Message: "The device sends only from " + dev.SelectedSIM + "."}
	}
	if len(dev.SIMs) == 0 {
		return nil
	}
	var have []string
	for _, sim := range dev.SIMs {
		if sim.Slot == slot {
			return nil
		}
		have = append(have, sim.Slot)
	}
	return &problem.Error{Code: problem.SIMMismatch, Field: "sim_slot",
		Message: "The device has no SIM in " + slot + "; it announced " + strings.Join(have, " and ") + "."}
}

// region is the company's region for numbers written without their
// country code ("" for none: the international form is required).
func (s *Service) region(companyID uint64) (string, error) {
	c, err := s.store.Company(companyID)
	if err != nil {
		return "", err
	}
	return c.Region, nil
}

// deviceRegion is the region of the device's company, read for what the
// device's link does (store DeviceCompany): store.ErrDeviceGone when the
// device was deleted or its company is closing or removed, and only then.
func (s *Service) deviceRegion(dev store.Device) (string, error) {
	c, err := s.store.DeviceCompany(dev.CompanyID, dev.ID)
	if err != nil {
		return "", err
	}
	return c.Region, nil
}

// Run expires queued messages past their TTL, prunes old idempotency
// answers and queues scheduled messages at their time, until ctx ends.
func (s *Service) Run(ctx context.Context) {
	done := make(chan struct{}, 2)
	go func() { defer func() { done <- struct{}{} }(); s.runScheduler(ctx) }()
	go func() { defer func() { done <- struct{}{} }(); s.runFailover(ctx) }()
	defer func() { <-done; <-done }()
	t := time.NewTicker(expireEvery)
	defer t.Stop()
	lastPrune := s.now()
	for {
		s.expire(ctx)
		if now := s.now(); now.Sub(lastPrune) > time.Hour {
			if _, err := s.store.PruneIdempotency(now.Add(-24 * time.Hour)); err != nil {
				s.log.Error("prune idempotency keys", "err", err)
			}
			if _, err := s.store.PruneSIMCounts(now); err != nil {
				s.log.Error("prune per-SIM counts", "err", err)
			}
			lastPrune = now
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// expire marks queued messages past their time to live expired, a
// thousand a commit, until none is left or ctx ends: a stop waits for the
// commit under way only, and the next sweep takes the rest.
func (s *Service) expire(ctx context.Context) {
	for ctx.Err() == nil {
		expired, err := s.store.ExpireQueued(s.now(), 1000)
		if err != nil {
			s.log.Error("expire queued messages", "err", err)
			return
		}
		for _, m := range expired {
			s.changed(m)
		}
		if len(expired) > 0 {
			s.log.Info("queued messages expired", "count", len(expired))
		}
		if len(expired) < 1000 {
			return
		}
	}
}

// Expire marks queued messages past their TTL as expired now (the sweeper's
// step, for callers that do not wait for the next tick).
func (s *Service) Expire() { s.expire(context.Background()) }

// newID returns a time-ordered UUID (version 7): queue ids still look random
// to clients, but the store's uuid index grows at its end instead of taking
// random inserts across its B+tree.
func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
