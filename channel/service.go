package channel

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/simrelay/simrelay/internal/egress"
	"github.com/simrelay/simrelay/internal/visible"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/phone"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// Channels.
const (
	WhatsApp = store.ChannelNameWhatsApp
	IMessage = store.ChannelNameIMessage
)

// Content types of a send.
var contentTypes = map[string]bool{"text": true, "image": true, "video": true, "audio": true, "document": true}

// Dispatcher is told when a device has new jobs (gateway.Hub): Kick for
// jobs just queued, Release for jobs another agent was handed, or the
// device's link could not hand out, that may be the device's now (the
// link reads again those it passed over).
type Dispatcher interface {
	Kick(fingerprint string, deviceID uint64)
	Release(fingerprint string, deviceID uint64)
}

// Service is WhatsApp and iMessage.
type Service struct {
	cfg      Config
	store    Store
	gov      *pacing.Governor
	dispatch Dispatcher
	watch    sms.Watcher
	log      *slog.Logger
	now      func() time.Time
	// removedEvery is the period of Run's look for companies removed
	// elsewhere (RemovedEvery; a test's own).
	removedEvery time.Duration
}

// RemovedEvery is how often Run asks the store which companies of the
// governor's numbers were removed (forgetRemoved): a company removed by
// another node of a cluster, or by simrelay admin delete-company beside a
// running server, leaves this node's governor within it. One query, and
// only while the governor holds a number.
const RemovedEvery = time.Minute

// New returns the service; rnd is the governor's random source for the
// gap's jitter (injected, so tests can replay it).
func New(cfg Config, st Store, log *slog.Logger, now func() time.Time, rnd rand.Source) (*Service, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, store: st, gov: pacing.NewGovernor(rnd), log: log, now: now, removedEvery: RemovedEvery}, nil
}

// SetDispatcher wires the hub; call it before serving.
func (s *Service) SetDispatcher(d Dispatcher) { s.dispatch = d }

// SetWatcher wires the listener of message changes (the console's live
// updates), as sms.Service.SetWatcher does; call it before serving. Acks and
// status reports of WhatsApp and iMessage sends go through the SMS intake,
// which tells its own watcher; this one hears of new sends and inbound
// messages.
func (s *Service) SetWatcher(w sms.Watcher) { s.watch = w }

// changed tells the watcher, if any, of a committed change.
func (s *Service) changed(m store.Message) {
	if s.watch != nil {
		s.watch.MessageChanged(m)
	}
}

// Config is the service's configuration with its defaults filled in.
func (s *Service) Config() Config { return s.cfg }

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

// SendInput is one WhatsApp or iMessage send request.
type SendInput struct {
	CompanyID uint64
	UserID    uint64
	Channel   string // WhatsApp or IMessage
	// NumberID is the number's (or handle's) public id.
	NumberID       string
	To             string
	Type           string // text when empty
	Content        string
	MediaURL       string
	IdempotencyKey store.IdempotencyKey // keys are scoped by company and route
}

// idField is the name of the number field of a channel's send.
func idField(channel string) string {
	if channel == IMessage {
		return "handle_id"
	}
	return "number_id"
}

// normaliseTo checks a recipient: E.164, or (iMessage) an e-mail address.
// A recipient reaches a device tool as an argument (osascript on a Mac), so
// one that begins with "-" (a tool could read it as an option) or holds a
// control character is refused whatever its form. So is an invisible one:
// a format character (a right-to-left override, a zero-width space, a
// byte-order mark) or a line or paragraph separator, which would show the
// console and the API's answers another address than the agent is handed.
//
// A number is read in the company's region (numplan.Normalize): written
// without its country code there, it is still a number.
func normaliseTo(channel, to, region string) (string, error) {
	if fault := phone.RecipientFault(to); fault != "" {
		return "", problem.Invalid("to", fault)
	}
	to = strings.TrimSpace(to)
	if to == "" {
		return "", problem.Invalid("to", "is required")
	}
	if channel == IMessage && strings.Contains(to, "@") {
		return normaliseEmail("to", to)
	}
	n, err := numplan.Normalize(to, region)
	if err != nil {
		if channel == IMessage && region == "" {
			return "", problem.Invalid("to", "must be a phone number in international format (+ then 8 to 15 digits) or an e-mail address")
		}
		if channel == IMessage {
			return "", problem.Invalid("to", "must be an e-mail address or a phone number that "+err.Error())
		}
		return "", problem.Invalid("to", err.Error())
	}
	return n, nil
}

// normaliseEmail is a handle's e-mail address, lower-cased.
func normaliseEmail(field, v string) (string, error) {
	// Lower-cased first, so that the length bound holds for what is kept:
	// a few capitals take more bytes in lower case ("Ⱥ" is 2 bytes, "ⱥ" 3).
	v = strings.ToLower(v)
	local, domain, ok := strings.Cut(v, "@")
	if !ok || local == "" || domain == "" || strings.ContainsAny(v, " \t\r\n<>,;\"") || strings.Count(v, "@") != 1 || !strings.Contains(domain, ".") || len(v) > 254 {
		return "", problem.Invalid(field, "must be an e-mail address such as ana@example.com")
	}
	return v, nil
}

// validate checks a send and returns its content type and recipient, a
// number read in the company's region.
func (in SendInput) validate(region string) (contentType, to string, err error) {
	// A header may carry any bytes; PostgreSQL refuses a text that is not
	// UTF-8 (a 500 there), so the key is refused here as the client's.
	if !utf8.ValidString(in.IdempotencyKey.Key) {
		return "", "", problem.Invalid("Idempotency-Key", "must be UTF-8 text")
	}
	if utf8.RuneCountInString(in.IdempotencyKey.Key) > maxIdempotencyKey {
		return "", "", problem.Invalid("Idempotency-Key", "must be at most 255 characters")
	}
	if strings.TrimSpace(in.NumberID) == "" {
		return "", "", problem.Invalid(idField(in.Channel), "is required")
	}
	if to, err = normaliseTo(in.Channel, in.To, region); err != nil {
		return "", "", err
	}
	contentType = in.Type
	if contentType == "" {
		contentType = "text"
	}
	if !contentTypes[contentType] {
		return "", "", problem.Invalid("type", "must be text, image, video, audio or document")
	}
	if !utf8.ValidString(in.Content) {
		return "", "", problem.Invalid("content", "must be UTF-8")
	}
	if utf8.RuneCountInString(in.Content) > MaxContentChars {
		return "", "", problem.Invalid("content", "must be at most 4096 characters")
	}
	if strings.IndexByte(in.Content, 0) >= 0 {
		// As for SMS (sms.errNUL): PostgreSQL cannot hold it.
		return "", "", problem.Invalid("content", `must not hold the NUL character (\u0000)`)
	}
	if contentType == "text" {
		if in.Content == "" {
			return "", "", problem.Invalid("content", "is required for a text message")
		}
		if visible.None(in.Content) {
			return "", "", problem.Invalid("content", visible.FaultMessage)
		}
		if in.MediaURL != "" {
			return "", "", problem.Invalid("media_url", "must be empty for a text message; set type to image, video, audio or document")
		}
		return contentType, to, nil
	}
	if in.MediaURL == "" {
		return "", "", problem.Invalid("media_url", "is required for "+article(contentType)+" "+contentType+" message")
	}
	u, err := url.Parse(in.MediaURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" || len(in.MediaURL) > MaxMediaURL || u.User != nil {
		return "", "", problem.Invalid("media_url", "must be an https URL of at most 2048 characters, without credentials")
	}
	if err := egress.Port(u.Port()); err != nil {
		return "", "", problem.Invalid("media_url", err.Error())
	}
	// The agent fetches it from inside its owner's network: a host that is
	// an internal address by itself is refused here, and the agent checks
	// the address it dials (names included) again.
	if err := egress.Host(u.Hostname()); err != nil {
		return "", "", problem.Invalid("media_url", err.Error()+"; media is downloaded only from public addresses")
	}
	return contentType, to, nil
}

// Answer builds the HTTP answer of a stored send (kept with an idempotency key).
type Answer func(store.Message) (status int, body []byte)

// Send validates a send, takes a slot of the number's governor and durably
// queues the message in one step (a send over a cap is stored nowhere), then
// wakes the agent holding the number. With an idempotency key used before
// by the company on the route (within 24 h), the first answer comes back as
// prior.
func (s *Service) Send(_ context.Context, in SendInput, answer Answer) (msg store.Message, prior *store.Idempotent, err error) {
	if in.Channel != WhatsApp && in.Channel != IMessage {
		return msg, nil, problem.Invalid("channel", "must be whatsapp or imessage")
	}
	region, err := s.region(in.CompanyID)
	if err != nil {
		return msg, nil, err
	}
	contentType, to, err := in.validate(region)
	if err != nil {
		return msg, nil, err
	}
	now := s.now()
	m := store.Message{
		UUID: newID(), CompanyID: in.CompanyID, UserID: in.UserID, Channel: in.Channel, NumberRef: in.NumberID,
		Phone: to, Text: in.Content, ContentType: contentType, MediaURL: in.MediaURL, Segments: 1,
		ExpiresAt: now.Add(s.cfg.MessageTTL).UTC(),
	}
	var retry time.Duration
	vet := func(n store.AgentNumber, history func(time.Time) []time.Time) (func(), error) {
		at := s.now()
		if s.cfg.Shared {
			if wait := pacing.Check(s.caps(n, at), at, history); wait > 0 {
				retry = wait
				return nil, errCapped
			}
			return func() {}, nil
		}
		r, wait := s.gov.Reserve(govKey(n), s.caps(n, at), at, history)
		if r == nil {
			retry = wait
			return nil, errCapped
		}
		return r.Release, nil
	}
	msg, prior, err = s.store.EnqueueAgent(&m, in.IdempotencyKey, s.now, vet, answer)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return msg, nil, &problem.Error{Code: problem.NotFound, Field: idField(in.Channel), Message: "No such " + noun(in.Channel) + "."}
	case errors.Is(err, store.ErrNumberPaused):
		return msg, nil, &problem.Error{Code: problem.NumberPaused, Field: idField(in.Channel), Message: "The " + noun(in.Channel) + " is paused; set its status to active to send through it."}
	case errors.Is(err, errCapped):
		secs := problem.RetrySeconds(retry)
		return msg, nil, &problem.Error{Code: problem.NumberCapped, RetryAfter: secs,
			Message: "The " + noun(in.Channel) + " is at its send cap; retry after " + problem.Count(secs, "second") + "."}
	case err != nil:
		return msg, nil, sms.Refusal(err, s.now())
	}
	if prior == nil {
		s.changed(msg) // after the commit, never inside it
		if s.dispatch != nil && msg.Device != "" {
			s.dispatch.Kick(msg.Device, msg.DeviceID)
		}
	}
	return msg, prior, nil
}

var errCapped = errors.New("channel: the number is at its cap")

func noun(channel string) string {
	if channel == IMessage {
		return "iMessage handle"
	}
	return "WhatsApp number"
}

// aNoun is noun with its article: "an iMessage handle", "a WhatsApp number".
func aNoun(channel string) string {
	if channel == IMessage {
		return "an " + noun(channel)
	}
	return "a " + noun(channel)
}

// caps are the number's effective caps at now: its own or the channel's,
// halved during its warm-up.
func (s *Service) caps(n store.AgentNumber, now time.Time) pacing.Caps {
	c := s.cfg.pacing(n.Channel).Caps
	if n.Caps.PerMinute > 0 {
		c.PerMinute = n.Caps.PerMinute
	}
	if n.Caps.PerHour > 0 {
		c.PerHour = n.Caps.PerHour
	}
	if n.Caps.PerDay > 0 {
		c.PerDay = n.Caps.PerDay
	}
	if now.Sub(n.FirstSeen) < s.cfg.Warmup {
		c = c.Halved()
	}
	return c
}

// gap is the number's gap between dispatches: its own or the channel's.
func (s *Service) gap(n store.AgentNumber) pacing.Gap {
	if n.GapMax > 0 {
		return pacing.Gap{Min: n.GapMin, Max: n.GapMax}
	}
	return s.cfg.pacing(n.Channel).Gap
}

// newID returns a time-ordered UUID (version 7), as SMS queue ids are.
func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// govKey names the number to the governor.
func govKey(n store.AgentNumber) pacing.Key {
	return pacing.Key{Company: n.CompanyID, Number: n.ID}
}

// ForgetCompany drops what the governor keeps of the company's numbers,
// once the company's removal ended (account.Service.OnRemoved): it holds
// about 600 bytes a number, and a removed company's numbers send nothing
// again. A company whose removal ended elsewhere (another node, an admin
// command) goes at Run's next look for them (forgetRemoved).
func (s *Service) ForgetCompany(companyID uint64) {
	s.gov.ForgetCompany(companyID)
}

// forgetRemoved forgets the companies of the governor's numbers that the
// store no longer holds: their removal ended on another node of a cluster,
// or by simrelay admin delete-company, which account.Service.OnRemoved
// does not tell this node. One query for all of them, none while the
// governor holds no number. It returns how many companies it forgot.
func (s *Service) forgetRemoved() int {
	ids := s.gov.Companies()
	if len(ids) == 0 {
		return 0
	}
	gone, err := s.store.GoneCompanies(ids)
	if err != nil {
		s.log.Warn("look for removed companies among the governor's; looked again within a minute", "err", err)
		return 0
	}
	for _, id := range gone {
		s.gov.ForgetCompany(id)
	}
	return len(gone)
}

// governorIdle is how long after its last dispatch (and the last job
// taken it knows of) a number's state may carry nothing (pacing.Governor
// Sweep): the longest gap a number may have, its own (maxGapSeconds) or
// the channels'.
func (s *Service) governorIdle() time.Duration {
	return max(maxGapSeconds*time.Second, s.cfg.WhatsApp.Gap.Max, s.cfg.IMessage.Gap.Max)
}

// sweepGovernor drops the state of the numbers that carry nothing now:
// their windows empty and their gap long over. Numbers no longer
// announced go so.
func (s *Service) sweepGovernor() int {
	return s.gov.Sweep(s.now(), s.governorIdle())
}

// GovernorNumbers is how many numbers the governor holds the state of.
func (s *Service) GovernorNumbers() int { return s.gov.Len() }

// Run prunes the index of accepted sends past the longest window, and the
// governor's numbers that carry nothing (sweepGovernor), every hour, and
// forgets the companies removed elsewhere (forgetRemoved) every
// RemovedEvery, until ctx ends; it does all three as it starts.
func (s *Service) Run(ctx context.Context) {
	hour := time.NewTicker(time.Hour)
	defer hour.Stop()
	removed := time.NewTicker(s.removedEvery)
	defer removed.Stop()
	s.forgetRemoved()
	s.prune()
	for {
		select {
		case <-ctx.Done():
			return
		case <-removed.C:
			s.forgetRemoved()
		case <-hour.C:
			s.prune()
		}
	}
}

// prune is Run's hourly work: the index of accepted sends past the
// longest window, and the governor's numbers that carry nothing.
func (s *Service) prune() {
	if _, err := s.store.PruneAgentSends(s.now().Add(-25 * time.Hour)); err != nil {
		s.log.Error("prune the index of accepted WhatsApp and iMessage sends", "err", err)
	}
	s.sweepGovernor()
}

// article is the indefinite article before a content type's name.
func article(word string) string {
	if strings.ContainsAny(word[:1], "aeiou") {
		return "an"
	}
	return "a"
}
