package channel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/phone"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// The agents' side, for the hub (gateway.Agents).

// CheckedAnnounce is what an agent's hello tells the agents' service, held
// to its rules by CheckAnnounce and in the form Announce and Release store
// it: the WhatsApp numbers and iMessage handles as stored, each once, and
// the jobs the agent holds. A hello is checked once, before any part of it
// is stored, and Announce and Release take only what the check passed. The
// zero CheckedAnnounce announces no number and says nothing of its jobs:
// Announce lets go the numbers the device held, and Release does nothing.
type CheckedAnnounce struct {
	whatsApp []string
	iMessage []string
	// jobs is hello.jobs: nil when the hello said nothing of them (an
	// agent older than revision 1.42), empty when it holds none.
	jobs []string
}

// Announce records the numbers and handles of an agent's hello, as
// CheckAnnounce found them, for its registration (the latest hello that
// announces a number holds it) and returns the store ids of all of them:
// the numbers whose jobs the link carries, each once. Both channels are
// one write (store AnnounceAgentNumbers): stored together or not at all.
// The write counts the company's numbers again, and refuses what another
// agent's hello made too many since the check (MaxNumbersPerCompany): the
// whole hello then, its WhatsApp numbers too when its iMessage handles
// are past the bound.
func (s *Service) Announce(_ context.Context, dev store.Device, hello CheckedAnnounce) ([]uint64, error) {
	var sets []store.Announced
	for _, set := range hello.sets() {
		// Sent with none too: a device that held numbers lets them go.
		sets = append(sets, store.Announced{Channel: set.channel, Addresses: set.addrs})
	}
	nums, err := s.store.AnnounceAgentNumbers(dev.CompanyID, dev.ID, sets, s.now(), MaxNumbersPerCompany)
	if full := (*store.TooManyNumbersError)(nil); errors.As(err, &full) {
		return nil, tooManyNumbers(full.Channel)
	}
	if err != nil {
		return nil, err
	}
	ids := make([]uint64, 0, len(nums))
	for _, n := range nums {
		ids = append(ids, n.ID)
	}
	return ids, nil
}

// CheckAnnounce holds the hello's numbers and handles, and the jobs it
// names, to the rules Announce and Release hold them to, storing nothing,
// and returns them for Announce and Release: a bad entry refuses the whole
// hello (PROTOCOL.md section 16.1), so the link checks them before it
// stores any part of it, the device's SIMs and app version included. An
// entry naming a number listed before it, in any spelling, adds nothing;
// a bad one is named (whatsapp[1].phone). The company's region, which the
// numbers are read in, is read once here, and only for a hello that names
// a number or handle, as the device's company (store DeviceCompany): a
// device deleted, or its company closing or removed, is
// store.ErrDeviceGone, which the hub closes as the device gone, and every
// other error is a fault. The company's bound on its numbers
// (MaxNumbersPerCompany) is counted too, on the numbers stored now;
// Announce's write counts them again, and refuses what another agent's
// hello made too many since.
//
// The check reads what the bound needs (store AgentNumbersNew): the
// announced numbers looked up, and the company's numbers of the channel
// counted only when one of them is new, so the usual hello (an agent
// linking again with the numbers it had) reads as many as it names, not
// the company's up to 1,000. A hello of numbers the company all has is
// never past the bound, as the write never refuses it, whatever the count.
//
// The count is a read of its own, not part of the device write: that write
// (device.Service.Hello, store UpdateDeviceWith) is the device service's,
// whose function sees the device record and no store transaction, and the
// numbers are written after it, in Announce's own transaction (both
// channels in one). Counting inside the device write would still leave the window
// between it and the numbers' write (PROTOCOL.md 1.45: another agent's
// hello may take the last places there), so the write's check stays
// either way; closing the window means writing the device and its numbers
// in one transaction, across both services and both stores.
func (s *Service) CheckAnnounce(_ context.Context, dev store.Device, hello proto.Hello) (CheckedAnnounce, error) {
	if len(hello.Jobs) > proto.MaxHelloJobs {
		return CheckedAnnounce{}, problem.Invalid("jobs", fmt.Sprintf("must hold at most %d ids", proto.MaxHelloJobs))
	}
	checked, err := s.announced(dev, hello)
	if err != nil {
		return CheckedAnnounce{}, err
	}
	for _, set := range checked.sets() {
		if len(set.addrs) == 0 {
			continue
		}
		fresh, have, err := s.store.AgentNumbersNew(dev.CompanyID, set.channel, set.addrs)
		if err != nil {
			return CheckedAnnounce{}, err
		}
		if fresh > 0 && have+fresh > MaxNumbersPerCompany {
			return CheckedAnnounce{}, tooManyNumbers(set.channel)
		}
	}
	checked.jobs = hello.Jobs
	return checked, nil
}

// tooManyNumbers refuses a hello whose new numbers (or handles) of
// channel would take the company past MaxNumbersPerCompany.
func tooManyNumbers(channel string) error {
	return problem.Invalid(channel, fmt.Sprintf("would take the company past %d %ss, the most it may have", MaxNumbersPerCompany, noun(channel)))
}

// announcement is what a hello announces of one channel: its numbers (or
// handles) as stored, each once.
type announcement struct {
	channel string
	addrs   []string
}

// sets is the hello's WhatsApp numbers and iMessage handles, in that
// order: both channels, each perhaps with none.
func (h CheckedAnnounce) sets() []announcement {
	return []announcement{{WhatsApp, h.whatsApp}, {IMessage, h.iMessage}}
}

// announced is the hello's WhatsApp numbers and iMessage handles as
// stored, each once, or the problem of its first bad entry. The company's
// region is read only for a hello that names one.
func (s *Service) announced(dev store.Device, hello proto.Hello) (CheckedAnnounce, error) {
	var h CheckedAnnounce
	if len(hello.WhatsApp) > MaxAnnounced {
		return h, problem.Invalid("whatsapp", fmt.Sprintf("must hold at most %d numbers", MaxAnnounced))
	}
	if len(hello.IMessage) > MaxAnnounced {
		return h, problem.Invalid("imessage", fmt.Sprintf("must hold at most %d handles", MaxAnnounced))
	}
	if len(hello.WhatsApp) == 0 && len(hello.IMessage) == 0 {
		return h, nil
	}
	region, err := s.deviceRegion(dev)
	if err != nil {
		return h, err
	}
	for i, n := range hello.WhatsApp {
		v, err := numplan.Reported(n.Phone, region)
		if err != nil {
			return CheckedAnnounce{}, problem.Invalid(fmt.Sprintf("whatsapp[%d].phone", i), err.Error())
		}
		if !slices.Contains(h.whatsApp, v) { // named twice, or in two spellings: once
			h.whatsApp = append(h.whatsApp, v)
		}
	}
	for i, hd := range hello.IMessage {
		field := fmt.Sprintf("imessage[%d].handle", i)
		if fault := phone.RecipientFault(hd.Handle); fault != "" {
			return CheckedAnnounce{}, problem.Invalid(field, fault)
		}
		v, err := normaliseHandle(hd.Handle, region)
		if err != nil {
			return CheckedAnnounce{}, problem.Invalid(field, "must be an E.164 phone number or an e-mail address")
		}
		if !slices.Contains(h.iMessage, v) {
			h.iMessage = append(h.iMessage, v)
		}
	}
	return h, nil
}

// normaliseHandle is an iMessage handle an agent reports: an E.164 number
// (read in the company's region, numplan.Reported), or a lower-cased e-mail.
// A handle is held to a recipient's rule (phone.RecipientFault): it is shown
// in the console and the API as the number's address, and handed back to
// the agent's tool as send.from, so a control or invisible character, or a
// leading '-', is refused as it is in a recipient.
func normaliseHandle(v, region string) (string, error) {
	if fault := phone.RecipientFault(v); fault != "" {
		return "", problem.Invalid("handle", fault)
	}
	v = strings.TrimSpace(v)
	if strings.Contains(v, "@") {
		return normaliseEmail("handle", v)
	}
	return numplan.Reported(v, region)
}

// normaliseSender is the sender of an inbound message as stored: an
// iMessage e-mail lower-cased, and a number read as an SMS sender is
// (numplan.Sender in the company's region, E.164 alone without one), so
// that digits whose + was dropped, as WhatsApp writes its contacts
// ("4915123456789"), are the number sends and the SMS history name
// (+4915123456789 in DE), not a long national one (+494915123456789).
// Anything else, or a sender a recipient could not be, is kept as given.
func normaliseSender(channel, from, region string) string {
	if phone.RecipientFault(from) != "" {
		return from
	}
	if channel == IMessage && strings.Contains(from, "@") {
		if v, err := normaliseEmail("from", from); err == nil {
			return v
		}
		return from
	}
	if region == "" {
		if n, err := numplan.Normalize(from, ""); err == nil {
			return n
		}
		return from
	}
	if n, ok := numplan.Sender(from, region); ok {
		return n
	}
	return from
}

// Pending returns up to limit of the number's jobs for the device after
// the one with seq after, oldest first (the number must be held by the
// device), as sms.Service.Pending does for a device's SMS: a job whose TTL
// ended has no send frame. A paused number's jobs are held: none, until it
// is active again (its TTL runs meanwhile; the expiry sweep ends the ones
// it outlasts).
func (s *Service) Pending(_ context.Context, dev store.Device, numberID, after uint64, limit int) ([]sms.Job, error) {
	msgs, err := s.store.AgentPending(dev.CompanyID, dev.ID, numberID, after, limit)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]sms.Job, 0, len(msgs))
	for _, m := range msgs {
		j := sms.Job{Seq: m.ID, HandedTo: m.HandedTo}
		if m.ExpiresAt.IsZero() || now.Before(m.ExpiresAt) {
			j.Send = &proto.Send{ID: m.UUID, Channel: m.Channel, To: m.Phone, From: m.Account, Message: m.Text, ContentType: m.ContentType, MediaURL: m.MediaURL, ExpiresAt: m.ExpiresAt.UTC().Format(timeLayout)}
		}
		out = append(out, j)
	}
	return out, nil
}

// HandOut records that the job (its Seq) goes to the device's link, before
// the link writes it, and says whether it may: false when the device no
// longer holds the job's number, the number is paused, the job was taken,
// or it went to another agent that still exists (store.AgentHandOut).
func (s *Service) HandOut(_ context.Context, dev store.Device, seq uint64) (bool, error) {
	return s.store.AgentHandOut(dev.CompanyID, dev.ID, seq)
}

// Release takes an agent's word at its hello (hello.jobs, PROTOCOL.md
// section 16.1), as CheckAnnounce found it (at most proto.MaxHelloJobs
// ids): the jobs named are every WhatsApp and iMessage job its journal
// holds unsettled. The queued sends handed to its registration that it
// does not name were lost with a link before it journaled them: they go
// to their numbers' holders at once, whose links are told of the release (on a cluster,
// through the node that holds them; its sweep releases them too, should
// that fail). A hello that said nothing of its jobs releases none.
func (s *Service) Release(_ context.Context, dev store.Device, hello CheckedAnnounce) error {
	held := hello.jobs
	if held == nil {
		return nil
	}
	nums, err := s.store.AgentRelease(dev.CompanyID, dev.ID, held)
	if err != nil {
		return err
	}
	released := map[uint64]bool{dev.ID: true} // its own link pumps once its hello is done
	for _, n := range nums {
		s.log.Info("agent jobs released: the agent that was handed them does not hold them", "device", dev.Fingerprint, "number", n.PublicID, "holder", n.Device)
		if s.dispatch == nil || n.DeviceID == 0 || released[n.DeviceID] {
			continue
		}
		released[n.DeviceID] = true
		s.dispatch.Release(n.Device, n.DeviceID)
	}
	return nil
}

// Released tells the links of the agents holding the company's numbers
// after the device was deleted that its jobs are released: the jobs it had
// been handed and not settled are theirs now (store.AgentPending), and a
// link reads those it passed over again at a release (Dispatcher.Release;
// a kick for a new job does not). On a cluster the links' periodic sweep
// releases them too, should this fail.
func (s *Service) Released(dev store.Device) {
	if s.dispatch == nil {
		return
	}
	kicked := map[uint64]bool{dev.ID: true}
	for _, ch := range []string{WhatsApp, IMessage} {
		nums, err := s.store.AgentNumbers(dev.CompanyID, ch)
		if err != nil {
			s.log.Warn("the numbers of a deleted agent's company could not be read: their agents take its jobs when they link again (on a cluster, at the next link sweep)", "company", dev.CompanyID, "device", dev.Fingerprint, "error", err)
			return
		}
		for _, n := range nums {
			if n.DeviceID == 0 || kicked[n.DeviceID] {
				continue
			}
			kicked[n.DeviceID] = true
			s.dispatch.Release(n.Device, n.DeviceID)
		}
	}
}

// Ready says whether the number may hand a job to its agent now: wait 0
// means yes (and the gap to the next one starts; turn gives it back when
// the job does not go after all, its hand-out refused), otherwise how long
// to wait. A number paused since its job was read waits (Pending holds a
// paused number's jobs; resuming it kicks its agent's link), and starts no
// gap; so does one gone since (its company's removal). A store fault is
// the caller's, as at its other reads of the queue: a wait would hold the
// job on a link that looks well.
func (s *Service) Ready(dev store.Device, numberID uint64) (turn *pacing.Turn, wait time.Duration, err error) {
	n, err := s.store.AgentNumberByRef(dev.CompanyID, numberID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, time.Minute, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if n.Status == store.NumberPaused {
		return nil, time.Minute, nil // resuming it kicks the link
	}
	turn, wait = s.gov.Dispatch(govKey(n), s.gap(n), s.now(), n.LastTakenAt)
	return turn, wait, nil
}

// Waits is how long the number's gap still holds its next job back, as
// this node's governor knows it (0: not at all, or not known), reading
// nothing: a link whose number's job waited for the gap at its last
// check (Ready) need not read the queue and the number again before then.
// A gap changed since may let the job go sooner: Update releases the
// number's link, which checks again.
func (s *Service) Waits(dev store.Device, numberID uint64) time.Duration {
	return s.gov.Waits(pacing.Key{Company: dev.CompanyID, Number: numberID}, s.now())
}

// Inbound stores a WhatsApp or iMessage message an agent received, once
// per client_id, and returns the acknowledgement to send once it is durable.
func (s *Service) Inbound(_ context.Context, dev store.Device, in proto.Inbound) (proto.InboundAck, error) {
	if in.ClientID == "" || len(in.ClientID) > proto.MaxClientIDBytes {
		return proto.InboundAck{}, problem.Invalid("client_id", fmt.Sprintf("is required, at most %d bytes of UTF-8", proto.MaxClientIDBytes))
	}
	if in.Channel != WhatsApp && in.Channel != IMessage {
		return proto.InboundAck{}, problem.Invalid("channel", "must be whatsapp or imessage")
	}
	// sim_slot means nothing here and is ignored (an agent that shares
	// code with an SMS phone may send one).
	// The read is for the region. Its refusal only answers early: a
	// company marked closing after it is refused by the write below
	// (StoreAgentInbound), in its own transaction.
	region, err := s.deviceRegion(dev)
	if errors.Is(err, store.ErrDeviceGone) {
		// The device was deleted, or its company is closing or removed.
		return proto.InboundAck{}, sms.ErrInboundDeviceGone
	}
	if err != nil {
		return proto.InboundAck{}, err
	}
	var to string
	if in.Channel == IMessage {
		to, err = normaliseHandle(in.To, region)
	} else {
		to, err = numplan.Reported(in.To, region)
	}
	if err != nil {
		return proto.InboundAck{}, problem.Invalid("to", "is required: the number or handle, as announced in hello, that received the message")
	}
	from := strings.TrimSpace(in.From)
	if from == "" || len(from) > 254 {
		return proto.InboundAck{}, problem.Invalid("from", "is required, at most 254 bytes of UTF-8")
	}
	from = normaliseSender(in.Channel, from, region)
	if !utf8.ValidString(in.Message) {
		return proto.InboundAck{}, problem.Invalid("message", "must be UTF-8")
	}
	if utf8.RuneCountInString(in.Message) > sms.MaxInboundChars {
		return proto.InboundAck{}, problem.Invalid("message", fmt.Sprintf("must be at most %d characters", sms.MaxInboundChars))
	}
	receivedAt := in.ReceivedAt
	if receivedAt == "" {
		receivedAt = s.now().UTC().Format(timeLayout)
	}
	at, err := sms.ParseTime(receivedAt)
	if err != nil {
		return proto.InboundAck{}, problem.Invalid("received_at", "must be an RFC 3339 time such as 2026-11-22T10:04:05.123Z")
	}
	if len(in.Media) > MaxMediaPerMessage {
		return proto.InboundAck{}, problem.Invalid("media", fmt.Sprintf("must name at most %d files", MaxMediaPerMessage))
	}
	var files []store.MediaRef
	for i, id := range in.Media {
		if id == "" || len(id) > 64 || slices.Contains(in.Media[:i], id) {
			return proto.InboundAck{}, problem.Invalid(fmt.Sprintf("media[%d]", i), "must be the id of an upload (POST /device/media), each once")
		}
		files = append(files, store.MediaRef{ID: id})
	}
	m := store.Message{
		Media: files,
		UUID:  newID(), CompanyID: dev.CompanyID, DeviceID: dev.ID, Channel: in.Channel, Phone: from, Account: to, Text: in.Message,
		ContentType: "text", Segments: 1, ClientID: in.ClientID, ReceivedAt: at.UTC().Format(timeLayout),
	}
	stored, dup, err := s.store.StoreAgentInbound(&m, s.now)
	switch {
	case errors.Is(err, store.ErrDeviceGone):
		return proto.InboundAck{}, sms.ErrInboundDeviceGone
	case errors.Is(err, store.ErrNotFound):
		return proto.InboundAck{}, problem.Invalid("to", "is not "+aNoun(in.Channel)+" of this company: announce it in hello first")
	case errors.Is(err, store.ErrMediaUnknown):
		return proto.InboundAck{}, problem.Invalid("media", "names a file this device did not upload (POST /device/media), or one another message took: upload it again and send its new id")
	case errors.Is(err, store.ErrNumberNotHeld):
		return proto.InboundAck{}, problem.Invalid("to", "is held by another agent of this company: only the agent whose latest hello announced it may deliver its messages")
	case err != nil:
		return proto.InboundAck{}, sms.Refusal(err, s.now())
	}
	if !dup {
		s.changed(stored)
	}
	return proto.InboundAck{ClientID: in.ClientID, ID: stored.ID, UUID: stored.UUID}, nil
}

const timeLayout = "2006-01-02T15:04:05.000Z"
