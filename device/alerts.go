package device

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
)

// DefaultOfflineGrace is how long a phone may be without a link before it
// is reported offline (device.offline and the admins' mail): longer than a
// reconnect after a network change or a server restart (seconds) and than
// the server's own detection of a silent phone (about 90 s), so that a
// blip is never an event.
const DefaultOfflineGrace = 2 * time.Minute

// OfflineMailEvery is the least time between two offline mails about one
// device: a phone that flaps all night sends its admins one an hour.
const OfflineMailEvery = time.Hour

// OfflineMailsPerHour bounds the phones a company's admins are mailed
// about in an hour. OfflineMailEvery bounds each phone, but a company
// holds as many phones as it pairs, and each mail is the server's own
// (outside the companies' mail outbox bound and the storage budget): a
// fleet of phones dropping their links together, or made to, would have
// the server queue and send a mail per phone and admin every hour, and
// keep each for days. Past the bound a phone is still reported offline
// (device.offline, the console), without a mail.
const OfflineMailsPerHour = 10

// OfflineMailScope is the scope of the offline mails' windows among the
// windows a cluster shares (postgres.Windows).
const OfflineMailScope = "offline-mail"

// OfflineMailRate is the rate OfflineMailsPerHour sets: every node must
// count the shared windows at it.
func OfflineMailRate() pacing.Rate {
	return pacing.Rate{Limit: OfflineMailsPerHour, Window: time.Hour}
}

// OfflineWindows are windows every node of a cluster counts in
// (postgres.Windows at OfflineMailRate).
type OfflineWindows interface {
	Take(key string) (pacing.Result, error)
}

// ShareOfflineMails has the offline mails counted in w, so that a company
// is mailed about OfflineMailsPerHour phones an hour by the whole cluster,
// not that many by each node; call it before serving. On one node nothing
// calls it and the count stays in the process's memory.
func (s *Service) ShareOfflineMails(w OfflineWindows) { s.sharedOffline = w }

// offlineMailAllowed counts one offline mail of the company and says
// whether it may go out. While the shared windows do not answer, the node
// counts in its own memory (pacing.Shared).
func (s *Service) offlineMailAllowed(companyID uint64) bool {
	res, _ := pacing.Shared[OfflineWindows]{Local: s.offlineMails, Cluster: s.sharedOffline, Failed: func(err error) {
		s.alerts.Logger.Warn("offline mails: the shared count does not answer; counted in this node's memory", "company_id", companyID, "err", err)
	}}.Take(strconv.FormatUint(companyID, 10))
	return res.Allowed
}

// Device event types, as the webhook outbox names them.
const (
	EventOnline     = "device.online"
	EventOffline    = "device.offline"
	EventBatteryLow = "device.battery_low"
)

// Mailer queues mail; *mail.Service is one.
type Mailer interface {
	Send(ctx context.Context, m mail.Message) error
}

// Alerts is what the service raises alerts through. A nil Mailer sends no
// mail. The device events a change raises are handed to the store with the
// change (UpdateDeviceWith), which writes them with the builder registered
// with it (store.SetDeviceEvents; *webhook.Service's DeviceEvents).
type Alerts struct {
	Mailer Mailer
	// OfflineGrace is DefaultOfflineGrace when zero.
	OfflineGrace time.Duration
	// DevicesURL is the console's devices page, the link of the offline mail.
	DevicesURL string
	Logger     *slog.Logger
}

// SetAlerts sets the offline mail and the presence's grace; call it before
// serving.
func (s *Service) SetAlerts(a Alerts) {
	if a.OfflineGrace <= 0 {
		a.OfflineGrace = DefaultOfflineGrace
	}
	if a.Logger == nil {
		a.Logger = slog.New(slog.DiscardHandler)
	}
	s.alerts = a
}

// raised is the one event of the type at a change of a device.
func raised(eventType string, at time.Time) []store.DeviceEvent {
	return []store.DeviceEvent{{Type: eventType, At: at}}
}

// Presence turns the ends and starts of a device's links into
// device.online and device.offline: a device whose link ends is reported
// offline only when it has had none for the grace, and reported online
// again only after that. The hub calls Up and Down; the only state kept in
// memory is one timer per device whose link ended within the grace.
type Presence struct {
	svc    *Service
	online func(fingerprint string, deviceID uint64) bool

	mu      sync.Mutex
	pending map[uint64]*time.Timer // by device id: offline checks due; guarded by mu
	stopped bool                   // guarded by mu
	wg      sync.WaitGroup         // running checks
}

// NewPresence returns the device presence of the service's alerts; online
// says whether a device (fingerprint and id) has a live link now (the
// hub's Online).
func (s *Service) NewPresence(online func(fingerprint string, deviceID uint64) bool) *Presence {
	return &Presence{svc: s, online: online, pending: map[uint64]*time.Timer{}}
}

// Up is called when a link of dev is registered (dev as read then): a
// pending offline check is dropped, and a device not reported online yet
// (its hello reports it, so this is rare) is reported online.
func (p *Presence) Up(dev store.Device) {
	p.mu.Lock()
	if t := p.pending[dev.ID]; t != nil {
		if t.Stop() {
			p.wg.Done() // its function will not run
		}
		delete(p.pending, dev.ID)
	}
	p.mu.Unlock()
	if dev.Health != nil && dev.Health.Presence == store.PresenceOnline {
		return // the hello reported it, or the blip was never reported
	}
	s := p.svc
	now := s.now()
	_, err := s.store.UpdateDeviceWith(dev.CompanyID, dev.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		return s.online(d, now), nil
	})
	switch {
	case errors.Is(err, store.ErrDeviceGone):
		// Deleted (or its company closing) since the link's hello: its
		// close is on the way, and there is no one to report it to.
		s.alerts.Logger.Debug("online report of a device gone", "device", dev.Fingerprint)
	case err != nil:
		s.alerts.Logger.Error("store device online", "device", dev.Fingerprint, "err", err)
	}
}

// online reports d online unless it is already, and returns the event
// that raises.
func (s *Service) online(d *store.Device, now time.Time) []store.DeviceEvent {
	if d.Health == nil {
		d.Health = &store.DeviceHealth{}
	}
	if d.Health.Presence == store.PresenceOnline {
		return nil
	}
	d.Health.Presence = store.PresenceOnline
	return raised(EventOnline, now)
}

// Down is called when the registered link of dev ended: if no link of it
// is up after the grace, it is reported offline.
func (p *Presence) Down(dev store.Device) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	var t *time.Timer
	p.wg.Add(1)
	t = time.AfterFunc(p.svc.alerts.OfflineGrace, func() {
		defer p.wg.Done()
		p.mu.Lock()
		current := p.pending[dev.ID] == t
		if current {
			delete(p.pending, dev.ID)
		}
		p.mu.Unlock()
		if current && !p.online(dev.Fingerprint, dev.ID) {
			p.offline(dev)
		}
	})
	if old := p.pending[dev.ID]; old != nil && old.Stop() {
		p.wg.Done() // its function will not run
	}
	p.pending[dev.ID] = t
}

// Resume is called once as the server starts, before it serves: every
// device last reported online whose link is not up now (linked says which
// are) had its link end with the server that stopped, so each gets the
// offline check a link's end gets (Down). One that links within the grace
// raises nothing; one that does not is reported offline and mailed about,
// as if it had dropped now. In a cluster, a device linked on another live
// node is left alone: its link did not end, and the node holding it (or
// the sweep that ends a dead node's links) starts the check when it does.
// Checked here, a phone reconnecting at the moment the grace ran out, a
// blip of a second, read as offline for the whole grace: device.offline
// and the admins' mail for a link that ended a second before.
//
// linked answers, of the devices given (fingerprint to id), those linked
// now, in one question for all (the routes' Presence: one statement in a
// cluster, not one per device).
func (p *Presence) Resume(linked func(devices map[string]uint64) map[string]time.Time) error {
	devs, err := p.svc.store.DevicesReportedOnline()
	if err != nil {
		return err
	}
	ids := make(map[string]uint64, len(devs))
	for _, d := range devs {
		ids[d.Fingerprint] = d.ID
	}
	up := linked(ids)
	for _, d := range devs {
		if _, ok := up[d.Fingerprint]; ok {
			continue
		}
		p.Down(d)
	}
	return nil
}

// Stop drops the pending checks and waits for running ones; Down does
// nothing after it. A device whose check was dropped keeps its last
// reported presence.
func (p *Presence) Stop() {
	p.mu.Lock()
	p.stopped = true
	for id, t := range p.pending {
		if t.Stop() {
			p.wg.Done()
		}
		delete(p.pending, id)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// offline reports dev offline, and mails the company's admins unless they
// were mailed about it within OfflineMailEvery. A link that registered
// while it wrote (after the hub was asked) finds the device online again
// once it is done: the link's Up read the device before the write.
func (p *Presence) offline(dev store.Device) {
	s := p.svc
	now := s.now()
	mailAdmins, wrote := false, false
	d, err := s.store.UpdateDeviceWith(dev.CompanyID, dev.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		mailAdmins, wrote = false, false // a retried transaction decides again
		if d.Health == nil {
			d.Health = &store.DeviceHealth{}
		}
		if d.Health.Presence == store.PresenceOffline {
			return nil, nil
		}
		d.Health.Presence, wrote = store.PresenceOffline, true
		if s.alerts.Mailer != nil && now.Sub(d.Health.OfflineMailAt) >= OfflineMailEvery {
			d.Health.OfflineMailAt = now.UTC()
			mailAdmins = true
		}
		return raised(EventOffline, now), nil
	})
	if errors.Is(err, store.ErrDeviceGone) {
		// Deleted during the grace (or its company closing): it is no
		// one's to report offline, and deleting a phone soon after its
		// link ended is no fault.
		s.alerts.Logger.Debug("offline check of a deleted device", "device", dev.Fingerprint)
		return
	}
	if err != nil {
		s.alerts.Logger.Error("store device offline", "device", dev.Fingerprint, "err", err)
		return
	}
	if wrote && p.online(dev.Fingerprint, dev.ID) {
		// A link registered after the check found none, and its Up may
		// have read the device online before this write and left it so:
		// the device is reported online again, after its offline.
		_, err := s.store.UpdateDeviceWith(dev.CompanyID, dev.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
			return s.online(d, s.now()), nil
		})
		if err != nil {
			s.alerts.Logger.Error("store device online", "device", dev.Fingerprint, "err", err)
		} else {
			mailAdmins = false // it is online: no mail says otherwise
		}
	}
	if mailAdmins && !s.offlineMailAllowed(d.CompanyID) {
		s.alerts.Logger.Info("offline mail not sent: the company's admins had their offline mails of the hour", "device", d.Fingerprint, "company_id", d.CompanyID, "limit", OfflineMailsPerHour)
		mailAdmins = false
	}
	if mailAdmins {
		s.mailOffline(d)
	}
}

func (s *Service) mailOffline(d store.Device) {
	users, err := s.store.CompanyUsers(d.CompanyID)
	if err != nil {
		s.alerts.Logger.Error("offline mail: list admins", "device", d.Fingerprint, "err", err)
		return
	}
	for _, u := range users {
		if u.Role != store.RoleAdmin || !u.EmailVerified {
			continue
		}
		m := mail.DeviceOffline(s.alerts.DevicesURL, u.FirstName, d.Name, d.Fingerprint, d.LastSeenAt, s.alerts.OfflineGrace)
		m.To = u.Email
		if err := s.alerts.Mailer.Send(context.Background(), m); err != nil {
			s.alerts.Logger.Error("offline mail", "device", d.Fingerprint, "user", u.ID, "err", fmt.Sprint(err))
		}
	}
}
