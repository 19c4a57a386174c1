package web

import (
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"time"

	qrcode "github.com/skip2/go-qrcode"

	androidproto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/bidi"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

func (c *Console) deviceRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"/devices", c.page(member, c.devicesPage))
	mux.HandleFunc("GET "+Prefix+"/devices/state", c.page(member, c.devicesState))
	// Pairing is not under /devices/: a phone may call itself "pair", and
	// its own form (/devices/{fp}) then made a pairing code instead.
	mux.HandleFunc("POST "+Prefix+"/pairing", c.action(member, Prefix+"/devices", c.pair))
	mux.HandleFunc("POST "+Prefix+"/devices/{fp}", c.actionAt(member, deviceBack, c.updateDevice))
	mux.HandleFunc("POST "+Prefix+"/devices/{fp}/delete", c.action(admin, Prefix+"/devices", c.deleteDevice))
}

// deviceRow is a device as the pages show it, with what the hub knows.
type deviceRow struct {
	Fingerprint string      `json:"fingerprint"`
	Name        string      `json:"name"`
	Status      string      `json:"status"`
	SelectedSIM string      `json:"selected_sim"`
	Online      bool        `json:"online"`
	LastSeen    time.Time   `json:"last_seen,omitzero"` // absent for a phone never seen
	SIMs        []store.SIM `json:"sims"`
	AppVersion  string      `json:"app_version"`
	Health      *healthView `json:"health"` // nil until the phone reports its health
	// QueueDepth is how many SMS wait for the phone, up to
	// store.MaxQueueDepth; Failures are its last failed or expired sends,
	// newest first. Only the devices page's cards show them, which alone
	// read them (deviceRows): the state's JSON (the badges' reload, the
	// pairing panel's poll) has neither.
	QueueDepth int                   `json:"-"`
	Failures   []store.DeviceFailure `json:"-"`
}

// healthView is a device's last health report as the cards show it; a
// field the phone did not report is nil (or "").
type healthView struct {
	Battery    *int              `json:"battery"`
	Charging   *bool             `json:"charging"`
	Signal     *int              `json:"signal"`
	Network    string            `json:"network"`
	SIMs       []store.SIMHealth `json:"sims"`
	BatteryLow bool              `json:"battery_low"`
	ReportedAt time.Time         `json:"reported_at"`
}

// IsCharging says the phone reported it is on a charger.
func (h *healthView) IsCharging() bool { return h.Charging != nil && *h.Charging }

func healthOf(h *store.DeviceHealth) *healthView {
	if h == nil || h.ReportedAt.IsZero() {
		return nil
	}
	return &healthView{Battery: h.Battery, Charging: h.Charging, Signal: h.Signal, Network: h.Network, SIMs: h.SIMs,
		BatteryLow: h.BatteryLow, ReportedAt: h.ReportedAt}
}

// devicesPresence asks the hub once which of devs are online, by
// fingerprint (with the link's last beat): on a cluster, the devices
// linked on other nodes are one query, not two per device.
func (c *Console) devicesPresence(devs []store.Device) map[string]time.Time {
	if c.deps.Phones == nil {
		return nil
	}
	ids := make(map[string]uint64, len(devs))
	for _, d := range devs {
		ids[d.Fingerprint] = d.ID
	}
	return c.deps.Phones.Presence(ids)
}

// deviceRows are the company's devices as the pages list them; with
// summaries, with each one's queue depth and last failures (one read of
// the store more, for the devices page's cards: the other pages and the
// state show neither, and read neither).
func (c *Console) deviceRows(r *http.Request, companyID uint64, summaries bool) ([]deviceRow, error) {
	devs, err := c.deps.Devices.List(r.Context(), companyID)
	if err != nil {
		return nil, err
	}
	presence := c.devicesPresence(devs)
	var sums map[uint64]store.DeviceSummary
	if summaries {
		// One read of the store for the queue depths and failures.
		if sums, err = c.deps.Devices.Summaries(r.Context(), companyID, devs); err != nil {
			return nil, err
		}
	}
	out := make([]deviceRow, 0, len(devs))
	for _, d := range devs {
		sum := sums[d.ID]
		row := deviceRow{Fingerprint: d.Fingerprint, Name: d.Name, Status: d.Status, SelectedSIM: d.SelectedSIM,
			LastSeen: d.LastSeenAt, SIMs: d.SIMs, AppVersion: d.AppVersion, Health: healthOf(d.Health),
			QueueDepth: sum.QueueDepth, Failures: sum.Failures}
		if live, online := presence[d.Fingerprint]; online {
			row.Online = true
			if live.After(row.LastSeen) {
				row.LastSeen = live
			}
		}
		out = append(out, row)
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.ToLower(out[i].Name) < strings.ToLower(out[j].Name) })
	return out, nil
}

type pairingView struct {
	Code    string
	URI     string
	QR      template.HTML
	Expires time.Time
	// Expired: no phone can register with Code any more (its time ran
	// out, a phone used it, or it is no code of the company's): the panel
	// says so and offers a new one.
	Expired bool
}

type devicesData struct {
	Devices []deviceRow
	Pairing *pairingView
	// ErrDevice is the device whose form a plain post's error came back
	// to (deviceBack): its form alone shows the error.
	ErrDevice string
	// LiveSince is the live view's mark, taken before the devices were
	// read (Broker.Mark): its stream says whether to reload the badges.
	LiveSince string
	// Full is the plan's device limit when the company has that many
	// devices (a new phone's registration is refused), else 0.
	Full int64
}

// deviceBack is the page a plain post of a device's form comes back to
// with its error: the devices page, saying which device's form it was, so
// that the error shows beside that device's field, not every device's.
func deviceBack(r *http.Request) string {
	if fp := r.PathValue("fp"); fingerprintForm.MatchString(fp) {
		return withQuery(Prefix+"/devices", "device", fp)
	}
	return Prefix + "/devices"
}

func (c *Console) devicesPage(w http.ResponseWriter, r *http.Request, q *req) error {
	since := c.deps.Broker.Mark()
	rows, err := c.deviceRows(r, q.p().CompanyID, true)
	if err != nil {
		return err
	}
	data := devicesData{Devices: rows, ErrDevice: query(r).Get("device"), LiveSince: since}
	if c.deps.Billing != nil {
		// A plan with no room left refuses a new phone at its registration,
		// which the phone alone is told: the page says so beside the
		// button, which stays (a phone registered already re-pairs).
		limit, err := c.deps.Billing.DeviceLimit(q.p().CompanyID)
		if err != nil {
			return err
		}
		if limit >= 0 && int64(len(rows)) >= limit {
			data.Full = limit
		}
	}
	if code := query(r).Get("pairing"); code != "" {
		uri, err := c.deps.Devices.PairingURI(r.Context(), q.p().CompanyID, code)
		if pe, ok := problem.As(err); ok && pe.Code == problem.NotFound {
			// A link to the page kept from before (a bookmark, the
			// browser's history) opens the page, saying the code no
			// longer works, not a 404 page; another company's code reads
			// the same as an expired one. The devices are listed again,
			// after the code: a phone that used it since the first list
			// (the page reloaded while it paired) is in this one, so the
			// page never says the code no longer works without the phone
			// that registered with it (its panel asks nothing more). A
			// live code keeps the first list, which the panel's poll
			// tells new devices from: a phone that used the code after
			// it is new to the panel, never one drawn as known.
			data.Pairing = &pairingView{Code: code, Expired: true}
			if data.Devices, err = c.deviceRows(r, q.p().CompanyID, true); err != nil {
				return err
			}
			c.render(w, r, http.StatusOK, "devices", c.viewFor(q, "Devices", data))
			return nil
		}
		if err != nil {
			return err
		}
		svg, err := qrSVG(uri)
		if err != nil {
			return err
		}
		data.Pairing = &pairingView{Code: code, URI: uri, QR: svg}
	}
	c.render(w, r, http.StatusOK, "devices", c.viewFor(q, "Devices", data))
	return nil
}

// devicesState is the list as JSON: the pairing panel polls it to turn into
// the new device once the phone registered and linked (online), or
// PageTimers.PairingLink after it registered without linking.
func (c *Console) devicesState(w http.ResponseWriter, r *http.Request, q *req) error {
	answer := map[string]any{}
	// The panel names its code (?pairing=): whether a phone can still
	// register with it. Once it cannot (expired, or used), the panel stops
	// asking and says so: it asked every 1.5 s for as long as the tab stayed
	// open, a day or a week, each time a request that kept the session
	// alive (no idle sign-out) and spent the user's share of the rate
	// limit, under a code no phone could use any more. Another company's
	// code is no live code, as on the page. The code is asked before the
	// devices are listed: a phone that used it by then is in the list, so
	// "expired" never comes without the phone that registered with it.
	if code := query(r).Get("pairing"); code != "" {
		answer["pairing"] = "live"
		if _, err := c.deps.Devices.PairingURI(r.Context(), q.p().CompanyID, code); err != nil {
			if pe, ok := problem.As(err); !ok || pe.Code != problem.NotFound {
				return err
			}
			answer["pairing"] = "expired"
		}
	}
	// The badges and the panel need no queue depths nor failures: not read.
	rows, err := c.deviceRows(r, q.p().CompanyID, false)
	if err != nil {
		return err
	}
	// Each row carries the signed notice the pairing panel shows once
	// the device registers (the banner shows signed notices only).
	type stateRow struct {
		deviceRow
		Paired    string `json:"paired"`
		PairedSig string `json:"paired_sig"`
	}
	out := make([]stateRow, len(rows))
	for i, d := range rows {
		msg := bidi.Isolate(d.Name) + " is paired."
		out[i] = stateRow{deviceRow: d, Paired: msg, PairedSig: c.flash.sign(q.sess.CSRF, "ok", msg, "")}
	}
	answer["devices"] = out
	writeJSON(w, http.StatusOK, answer)
	return nil
}

func (c *Console) pair(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	p, err := c.deps.Devices.CreatePairing(r.Context(), q.p().CompanyID, q.p().UserID)
	if err != nil {
		return outcome{}, err
	}
	return outcome{Redirect: withQuery(Prefix+"/devices", "pairing", p.Code)}, nil
}

func (c *Console) updateDevice(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	fp := r.PathValue("fp")
	var p device.Patch
	for name, dst := range map[string]**string{"device_name": &p.DeviceName, "selected_sim": &p.SelectedSIM, "status": &p.Status} {
		if v, ok := r.PostForm[name]; ok && len(v) > 0 {
			s := v[0]
			*dst = &s
		}
	}
	d, err := c.deps.Devices.Update(r.Context(), q.p().CompanyID, fp, p)
	if err != nil {
		return outcome{}, err
	}
	// The same pushes as PATCH /device/{fp}: the phone learns at once.
	if c.deps.Phones != nil {
		if d.Status == store.DeviceDisabled {
			if err := device.SeenStored(r.Context(), c.deps.Phones.Disconnect(d.Fingerprint, d.ID, androidproto.CloseDeviceGone, "device disabled")); err != nil {
				return outcome{}, err
			}
		} else {
			c.deps.Phones.Configure(d.Fingerprint, d.ID, androidproto.Config{SelectedSIM: d.SelectedSIM, DeviceName: d.Name, Status: d.Status})
			c.deps.Phones.Pace(d.Fingerprint, d.ID, d.SMSPerMinute)
		}
	}
	return outcome{Notice: bidi.Isolate(d.Name) + " saved."}, nil
}

func (c *Console) deleteDevice(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	fp := r.PathValue("fp")
	d, err := c.deps.Devices.Delete(r.Context(), q.p().CompanyID, fp)
	if err != nil {
		return outcome{}, err
	}
	if c.deps.Phones != nil {
		if err := device.SeenStored(r.Context(), c.deps.Phones.Disconnect(d.Fingerprint, d.ID, androidproto.CloseDeviceGone, "device deleted")); err != nil {
			return outcome{}, err
		}
	}
	return outcome{Notice: device.DeletedNotice}, nil
}

// qrSVG draws a QR code as SVG on the server: crisp at any size, no image
// route, no script.
func qrSVG(text string) (template.HTML, error) {
	code, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		return "", problem.New(problem.Internal, "The QR code could not be drawn.")
	}
	code.DisableBorder = false
	bm := code.Bitmap()
	n := len(bm)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="qr" role="img" aria-label="QR code of the pairing link" viewBox="0 0 %d %d" shape-rendering="crispEdges" xmlns="http://www.w3.org/2000/svg"><rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="`, n, n, n, n)
	for y, row := range bm {
		for x, on := range row {
			if on {
				fmt.Fprintf(&b, "M%d %dh1v1h-1z", x, y)
			}
		}
	}
	b.WriteString(`"/></svg>`)
	return template.HTML(b.String()), nil //nolint:gosec // built from numbers only
}
