package device

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/linebreak"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

var errNoDevice = problem.New(problem.NotFound, "No such device.")

// List returns the company's devices.
func (s *Service) List(_ context.Context, companyID uint64) ([]store.Device, error) {
	return s.store.CompanyDevices(companyID)
}

// Summaries answers, of the company's devices devs, each one's SMS waiting
// for the phone (up to store.MaxQueueDepth) and its last failed or expired
// sends (newest first, at most store.MaxDeviceFailures), by device id: one
// store read for a whole list, not two per device. A device absent from
// the answer has neither; a device of another company in devs is absent.
func (s *Service) Summaries(_ context.Context, companyID uint64, devs []store.Device) (map[uint64]store.DeviceSummary, error) {
	ids := make([]uint64, len(devs))
	for i, d := range devs {
		ids[i] = d.ID
	}
	return s.store.DeviceSummaries(companyID, ids)
}

// Get returns a device of the company; another company's is not found.
func (s *Service) Get(_ context.Context, companyID uint64, fingerprint string) (store.Device, error) {
	d, err := s.store.CompanyDevice(companyID, fingerprint)
	if errors.Is(err, store.ErrNotFound) {
		return store.Device{}, errNoDevice
	}
	return d, err
}

// Delete removes a device of the company and revokes its token; the store
// checks the company in the transaction of the delete. It answers the
// device deleted: its link, if any, is closed by its id, not by the
// fingerprint, which may be paired again at once.
func (s *Service) Delete(_ context.Context, companyID uint64, fingerprint string) (store.Device, error) {
	d, err := s.store.DeleteDevice(companyID, fingerprint, s.now())
	if errors.Is(err, store.ErrNotFound) {
		return store.Device{}, errNoDevice
	}
	if err == nil && s.deleted != nil {
		s.deleted(d)
	}
	return d, err
}

// DeletedNotice says what a deletion did, for the API's answer and the
// console's notice alike: the token ends, the SMS and the agent sends the
// device had acked fail (device_deleted), and the agent sends it had not
// acked go to the agent that holds their number (PROTOCOL.md 16.1).
const DeletedNotice = "Device deleted. Its token no longer works. Its unfinished SMS, and the WhatsApp and iMessage sends it had acked, failed (device_deleted); the WhatsApp and iMessage sends it had not acked go to the agent that holds their number."

// Patch changes a device; nil fields stay.
type Patch struct {
	DeviceName, SelectedSIM, Status *string
	SMSPerMinute                    *int
}

// MaxSMSPerMinute bounds the pacing setting: far above what Android lets one
// app send (about 30 a minute), so it only catches typing errors.
const MaxSMSPerMinute = 600

// Update applies a patch to a device of the company.
func (s *Service) Update(ctx context.Context, companyID uint64, fingerprint string, p Patch) (store.Device, error) {
	cur, err := s.Get(ctx, companyID, fingerprint)
	if err != nil {
		return store.Device{}, err
	}
	// The console's form sends the name with every change: a name stored
	// before line breaks were refused must not refuse the save of another
	// field (linebreak.SentBack).
	if p.DeviceName != nil && linebreak.SentBack(*p.DeviceName, cur.Name) {
		p.DeviceName = nil
	}
	if p.DeviceName != nil {
		n := strings.TrimSpace(*p.DeviceName)
		if err := CheckName("device_name", n); err != nil {
			return store.Device{}, err
		}
		p.DeviceName = &n
	}
	if p.SelectedSIM != nil && !ValidSelectedSIM(*p.SelectedSIM) {
		return store.Device{}, problem.Invalid("selected_sim", "must be SIM1, SIM2 or BOTH")
	}
	if p.Status != nil && *p.Status != store.DeviceActive && *p.Status != store.DeviceDisabled {
		return store.Device{}, problem.Invalid("status", "must be active or disabled")
	}
	if p.SMSPerMinute != nil && (*p.SMSPerMinute < 0 || *p.SMSPerMinute > MaxSMSPerMinute) {
		return store.Device{}, problem.Invalid("sms_per_minute", "must be from 0 (no pacing) to 600")
	}
	d, err := s.store.UpdateDevice(companyID, fingerprint, func(d *store.Device) error {
		if p.SMSPerMinute != nil {
			d.SMSPerMinute = *p.SMSPerMinute
		}
		if p.DeviceName != nil {
			d.Name = *p.DeviceName
		}
		if p.SelectedSIM != nil {
			d.SelectedSIM = *p.SelectedSIM
		}
		if p.Status != nil {
			d.Status = *p.Status
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return d, errNoDevice
	}
	return d, err
}

// ValidSelectedSIM reports whether v is a selected_sim value.
func ValidSelectedSIM(v string) bool { return proto.IsSelectedSIM(v) }

// ErrTokenRevoked is Hello's answer for a link whose token is no longer
// its device's: the device was paired again since the link's upgrade.
var ErrTokenRevoked = errors.New("device: the link's token was revoked")

// Hello records what a phone announced on connecting, as CheckHello
// found it good (h): its chosen SIM (the phone's user chose it, so it wins
// like any latest write), its SIMs, app version and health (none sent: the
// stored report stays), and that it was seen; a device last reported
// offline (or never) is reported online. The zero CheckedHello records
// that the device was seen and nothing more. dev is the device the link
// authenticated as; a registration deleted since then is
// store.ErrDeviceGone, even when its fingerprint is paired again, and so
// is one of a company marked closing or removed since (store
// UpdateDeviceWith): the store's word that the device is gone, which the
// link tells its phone (4503). Any other error says nothing of the device.
//
// The token and the status the link's upgrade checked are checked again
// in the write's transaction, on the device as it reads there: a token
// revoked since (the device paired again) is ErrTokenRevoked and a device
// disabled since store.ErrDeviceDisabled, and either writes nothing and
// raises no event (PROTOCOL.md section 16.1: a refused hello stores
// nothing of the device).
func (s *Service) Hello(_ context.Context, dev store.Device, h CheckedHello) (store.Device, error) {
	now := s.now()
	return s.store.UpdateDeviceWith(dev.CompanyID, dev.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		switch {
		case !bytes.Equal(d.TokenHash, dev.TokenHash):
			return nil, ErrTokenRevoked
		case d.Status == store.DeviceDisabled:
			return nil, store.ErrDeviceDisabled
		}
		if h.selectedSIM != "" {
			d.SelectedSIM = h.selectedSIM
		}
		if h.setSIMs {
			d.SIMs = h.sims
		}
		if h.appVersion != "" {
			d.AppVersion = h.appVersion
		}
		d.LastSeenAt = now.UTC()
		var events []store.DeviceEvent
		if h.hasHealth && applyHealth(d, h.report, now) {
			events = raised(EventBatteryLow, now)
		}
		// The link is coming up: device.online is raised here, in the
		// write the hello makes anyway, rather than in one of its own. A
		// link refused after its hello is reported down (Presence.Down).
		return append(events, s.online(d, now)...), nil
	})
}

// CheckedHello is what a phone's hello tells of the device, held to
// Hello's rules by CheckHello and in the form Hello stores it: a hello is
// checked once, before any part of it is stored, and Hello takes only
// what the check passed.
type CheckedHello struct {
	selectedSIM string
	setSIMs     bool // the hello sent its SIMs (nil: the stored ones stay)
	sims        []store.SIM
	appVersion  string
	hasHealth   bool // the hello sent a health report
	report      store.DeviceHealth
}

// CheckHello holds what a phone's hello tells of the device to the rules
// Hello holds it to, storing nothing, and returns it for Hello: a hello is
// refused whole for any bad part (PROTOCOL.md section 16.1), so the link
// checks every part of it, the device's and the agent's numbers, before it
// stores any.
func (s *Service) CheckHello(selectedSIM string, sims []store.SIM, appVersion string, health *proto.Health) (CheckedHello, error) {
	if selectedSIM != "" && !ValidSelectedSIM(selectedSIM) {
		return CheckedHello{}, problem.Invalid("selected_sim", "must be SIM1, SIM2 or BOTH")
	}
	clean, err := validSIMs(sims)
	if err != nil {
		return CheckedHello{}, err
	}
	appVersion = linebreak.Replace(appVersion) // mended, as in Register
	if len(appVersion) > 64 {
		return CheckedHello{}, problem.Invalid("app_version", "must be at most 64 bytes")
	}
	h := CheckedHello{selectedSIM: selectedSIM, setSIMs: sims != nil, sims: clean, appVersion: appVersion, hasHealth: health != nil}
	if health != nil {
		if h.report, err = ValidHealth(*health, "health."); err != nil {
			return CheckedHello{}, err
		}
	}
	return h, nil
}

// SeenStored waits for a closed link's last seen to be stored (the channel
// a hub's Disconnect returns) or for ctx to end, whichever first: a request
// that answers with the device next waits, but a store write that hangs
// holds no request past its client; the write goes on without it.
func SeenStored(ctx context.Context, stored <-chan struct{}) error {
	select {
	case <-stored:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Seen stores when a phone was last heard from (the registration dev, as
// with Hello).
func (s *Service) Seen(_ context.Context, dev store.Device, at time.Time) error {
	_, err := s.store.UpdateDeviceByID(dev.CompanyID, dev.ID, func(d *store.Device) error {
		if at.After(d.LastSeenAt) {
			d.LastSeenAt = at.UTC()
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil // deleted while connected
	}
	return err
}
