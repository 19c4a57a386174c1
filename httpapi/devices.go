package httpapi

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	qrcode "github.com/skip2/go-qrcode"

	androidproto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/store"
)

type simJSON struct {
	Slot        string `json:"slot"`
	Carrier     string `json:"carrier"`
	PhoneNumber string `json:"phone_number"`
}

type deviceJSON struct {
	DeviceFingerprint string `json:"device_fingerprint"`
	DeviceName        string `json:"device_name"`
	Status            string `json:"status"`
	SelectedSIM       string `json:"selected_sim"`
}

type deviceDetailJSON struct {
	deviceJSON
	UserID     uint64    `json:"user_id"`
	FCMToken   string    `json:"fcm_token"`
	Online     bool      `json:"online"`
	LastSeenAt *string   `json:"last_seen_at"`
	SIMs       []simJSON `json:"sims"`
	AppVersion string    `json:"app_version"`
	CreatedAt  string    `json:"created_at"`
	// SMSPerMinute paces sends to the phone; 0 means no pacing by the server.
	SMSPerMinute int `json:"sms_per_minute"`
	// Health is the phone's last health report; null until it sends one.
	Health *healthJSON `json:"health"`
	// QueueDepth counts the SMS waiting for the phone, up to store.MaxQueueDepth.
	QueueDepth int `json:"queue_depth"`
	// LastFailures are its last failed or expired sends, newest first.
	LastFailures []failureJSON `json:"last_failures"`
}

type failureJSON struct {
	At      string  `json:"at"`
	Status  string  `json:"status"`
	Error   *string `json:"error"`
	QueueID string  `json:"queue_id"`
	Channel string  `json:"channel"`
}

// healthJSON is a device's last health report; a field the phone did not
// report is null.
type healthJSON struct {
	Battery    *int            `json:"battery"`
	Charging   *bool           `json:"charging"`
	Signal     *int            `json:"signal"`
	Network    *string         `json:"network"`
	SIMs       []simHealthJSON `json:"sims"`
	BatteryLow bool            `json:"battery_low"`
	ReportedAt string          `json:"reported_at"`
}

type simHealthJSON struct {
	Slot     string  `json:"slot"`
	Operator *string `json:"operator"`
}

func healthOut(h *store.DeviceHealth) *healthJSON {
	if h == nil || h.ReportedAt.IsZero() {
		return nil
	}
	out := &healthJSON{Battery: h.Battery, Charging: h.Charging, Signal: h.Signal, SIMs: make([]simHealthJSON, 0, len(h.SIMs)),
		BatteryLow: h.BatteryLow, ReportedAt: ts(h.ReportedAt)}
	if h.Network != "" {
		out.Network = &h.Network
	}
	for _, sim := range h.SIMs {
		one := simHealthJSON{Slot: sim.Slot}
		if sim.Operator != "" {
			one.Operator = &sim.Operator
		}
		out.SIMs = append(out.SIMs, one)
	}
	return out
}

func deviceOut(d store.Device) deviceJSON {
	return deviceJSON{DeviceFingerprint: d.Fingerprint, DeviceName: d.Name, Status: d.Status, SelectedSIM: d.SelectedSIM}
}

// deviceDetail is d as the API answers it, with what the hub knows and the
// store's summary of it: a live link's last activity is newer than the
// stored last_seen_at, which is written when a link ends. presence is
// Phones.Presence and sum the device's Devices.Summaries entry, both asked
// once for all the devices being answered (detailsOf).
func deviceDetail(d store.Device, presence map[string]time.Time, sum store.DeviceSummary) deviceDetailJSON {
	out := deviceDetailJSON{QueueDepth: sum.QueueDepth, LastFailures: make([]failureJSON, 0, len(sum.Failures)), deviceJSON: deviceOut(d), UserID: d.UserID, FCMToken: d.FCMToken, AppVersion: d.AppVersion,
		CreatedAt: ts(d.CreatedAt), SIMs: make([]simJSON, 0, len(d.SIMs)), SMSPerMinute: d.SMSPerMinute, Health: healthOut(d.Health)}
	for _, sim := range d.SIMs {
		out.SIMs = append(out.SIMs, simJSON(sim))
	}
	for _, f := range sum.Failures {
		one := failureJSON{At: ts(f.At), Status: f.Status, QueueID: f.QueueID, Channel: cmp.Or(f.Channel, androidproto.ChannelSMS)}
		if f.Error != "" {
			one.Error = &f.Error
		}
		out.LastFailures = append(out.LastFailures, one)
	}
	seen := d.LastSeenAt
	if live, online := presence[d.Fingerprint]; online {
		out.Online = true
		if live.After(seen) {
			seen = live
		}
	}
	if !seen.IsZero() {
		v := ts(seen)
		out.LastSeenAt = &v
	}
	return out
}

// detailsOf answers devs, devices of the company, in their order. Two
// questions for them all, whatever their number: the hub's presence (on a
// cluster, one query for the devices linked on other nodes) and the store's
// summaries (one read), not one of each per device.
func (s *Server) detailsOf(ctx context.Context, companyID uint64, devs []store.Device) ([]deviceDetailJSON, error) {
	ids := make(map[string]uint64, len(devs))
	for _, d := range devs {
		ids[d.Fingerprint] = d.ID
	}
	sums, err := s.deps.Devices.Summaries(ctx, companyID, devs)
	if err != nil {
		return nil, err
	}
	presence := s.deps.Phones.Presence(ids)
	out := make([]deviceDetailJSON, 0, len(devs))
	for _, d := range devs {
		out = append(out, deviceDetail(d, presence, sums[d.ID]))
	}
	return out, nil
}

// detailOf is detailsOf of one device.
func (s *Server) detailOf(ctx context.Context, d store.Device) (deviceDetailJSON, error) {
	out, err := s.detailsOf(ctx, d.CompanyID, []store.Device{d})
	if err != nil {
		return deviceDetailJSON{}, err
	}
	return out[0], nil
}

func (s *Server) createPairing(c echo.Context) error {
	p := principal(c)
	pr, err := s.deps.Devices.CreatePairing(c.Request().Context(), p.CompanyID, p.UserID)
	if err != nil {
		return err
	}
	// The code is a credential (POST /device/register takes it), as its QR image is.
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, map[string]string{"pairing_code": pr.Code, "pairing_uri": pr.URI, "expires_at": ts(pr.ExpiresAt)})
}

func (s *Server) pairingQR(c echo.Context) error {
	uri, err := s.deps.Devices.PairingURI(c.Request().Context(), principal(c).CompanyID, c.Param("code"))
	if err != nil {
		return err
	}
	png, err := qrcode.Encode(uri, qrcode.Medium, 320)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "image/png", png)
}

func (s *Server) registerDevice(c echo.Context) error {
	var in struct {
		PairingCode       string    `json:"pairing_code"`
		DeviceFingerprint string    `json:"device_fingerprint"`
		DeviceName        string    `json:"device_name"`
		SIMs              []simJSON `json:"sims"`
		FCMToken          string    `json:"fcm_token"`
		AppVersion        string    `json:"app_version"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	sims := make([]store.SIM, 0, len(in.SIMs))
	for _, sim := range in.SIMs {
		sims = append(sims, store.SIM(sim))
	}
	reg, err := s.deps.Devices.Register(c.Request().Context(), device.RegisterInput{
		PairingCode: in.PairingCode, DeviceFingerprint: in.DeviceFingerprint, DeviceName: in.DeviceName,
		SIMs: sims, FCMToken: in.FCMToken, AppVersion: in.AppVersion,
	})
	if err != nil {
		return err
	}
	dev := reg.Device
	if reg.Replaced {
		// Waits for the old link's last seen (in dev), or for the phone to
		// give up: then no answer reaches it whatever is answered.
		if err := s.disconnect(c.Request().Context(), &dev, androidproto.CloseBadToken, "token replaced by a new registration"); err != nil {
			return err
		}
	}
	// The registration committed, its pairing code spent: the answer is
	// made of what the commit returned, with no read of the store after it
	// that could answer a fault (5xx, which tells the phone to retry a code
	// that is spent now) for a registration that was made. The device is
	// offline: a new one has never linked, and one registered again had its
	// link closed above (its last seen read then), while its new token is in
	// this answer only. So the hub is not asked again, which on a cluster is
	// a query that could find the closing link's row still open.
	out := deviceDetail(dev, nil, reg.Summary)
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, map[string]any{"device_token": reg.Token, "ws_url": s.deps.Devices.WebSocketURL(), "device": out})
}

func (s *Server) phoneSocket(c echo.Context) error {
	s.deps.PhoneSocket.ServeHTTP(c.Response(), c.Request())
	return nil
}

func (s *Server) chatDevices(c echo.Context) error {
	devs, err := s.deps.Devices.List(c.Request().Context(), principal(c).CompanyID)
	if err != nil {
		return err
	}
	out := make([]deviceJSON, 0, len(devs))
	for _, d := range devs {
		out = append(out, deviceOut(d))
	}
	return c.JSON(http.StatusOK, map[string]any{"devices": out})
}

func (s *Server) deviceList(c echo.Context) error {
	out, err := s.deviceDetails(c.Request().Context(), principal(c).CompanyID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// deviceDetails is the answer of GET /device/list (and of the MCP tool
// list_devices): the company's devices with what the hub knows of them.
func (s *Server) deviceDetails(ctx context.Context, companyID uint64) (map[string]any, error) {
	devs, err := s.deps.Devices.List(ctx, companyID)
	if err != nil {
		return nil, err
	}
	out, err := s.detailsOf(ctx, companyID, devs)
	if err != nil {
		return nil, err
	}
	return map[string]any{"devices": out}, nil
}

func (s *Server) deleteDevice(c echo.Context) error {
	fp := c.Param("device_fingerprint")
	d, err := s.deps.Devices.Delete(c.Request().Context(), principal(c).CompanyID, fp)
	if err != nil {
		return err
	}
	if err := device.SeenStored(c.Request().Context(), s.deps.Phones.Disconnect(d.Fingerprint, d.ID, androidproto.CloseDeviceGone, "device deleted")); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, messageJSON{device.DeletedNotice})
}

// disconnect closes d's link, if any, with code, for a handler that
// answers d next: offline from here, last seen at its link's last
// activity, stored before it returns (it waits on Disconnect's channel); d,
// read before, takes it too, so the answer does not show the time the
// link's hello stored. It gives up with ctx's error when the request ends
// first (its client gone): a store write that hangs holds no request.
func (s *Server) disconnect(ctx context.Context, d *store.Device, code int, reason string) error {
	if seen, ok := s.deps.Phones.Presence(map[string]uint64{d.Fingerprint: d.ID})[d.Fingerprint]; ok && seen.After(d.LastSeenAt) {
		d.LastSeenAt = seen
	}
	return device.SeenStored(ctx, s.deps.Phones.Disconnect(d.Fingerprint, d.ID, code, reason))
}

func (s *Server) patchDevice(c echo.Context) error {
	var in struct {
		DeviceName   *string `json:"device_name"`
		SelectedSIM  *string `json:"selected_sim"`
		Status       *string `json:"status"`
		SMSPerMinute *int    `json:"sms_per_minute"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	fp := c.Param("device_fingerprint")
	d, err := s.deps.Devices.Update(c.Request().Context(), principal(c).CompanyID, fp, device.Patch(in))
	if err != nil {
		return err
	}
	if d.Status == store.DeviceDisabled {
		if err := s.disconnect(c.Request().Context(), &d, androidproto.CloseDeviceGone, "device disabled"); err != nil {
			return err
		}
	} else {
		s.deps.Phones.Configure(d.Fingerprint, d.ID, androidproto.Config{SelectedSIM: d.SelectedSIM, DeviceName: d.Name, Status: d.Status})
		s.deps.Phones.Pace(d.Fingerprint, d.ID, d.SMSPerMinute)
	}
	out, err := s.detailOf(c.Request().Context(), d)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
