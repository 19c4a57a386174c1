package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/simrelay/simrelay/account"
	androidproto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/bidi"
	"github.com/simrelay/simrelay/internal/outage"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console's pages live. Only "/" (a redirect) and the
// two pages that e-mailed links open (/verify-email, /reset-password) sit
// outside it, so no console path can ever shadow an API route.
const Prefix = "/console"

// Config tunes the console.
type Config struct {
	// PublicURL is the server's address as users reach it; an https one
	// marks the session cookie Secure.
	PublicURL string
	// Streams bounds the live-update streams (events.go).
	Streams StreamConfig
	// Email is the e-mail to SMS listener the settings page tells admins
	// of; a zero Domain means it is off and the page says nothing of it.
	Email EmailToSMS
	// Timers are the console script's own waits, which every page tells it;
	// the server has no flag for them (the tests shorten them).
	Timers PageTimers
}

const (
	// DefaultPairingPoll is how often an open pairing panel asks whether a
	// phone registered with its code (GET /console/devices/state).
	DefaultPairingPoll = 1500 * time.Millisecond
	// DefaultPairingLink is how long at most the pairing panel, once a
	// phone registered with its code, waits for the phone's link before it
	// turns into the device: a phone links right after it registers, and
	// the device drawn before it did showed "offline" until a reload.
	DefaultPairingLink = 10 * time.Second
	// DefaultLiveLost is how long a live view's stream stays broken (the
	// network down, the server stopped) before the page says the server
	// could not be reached: twice the stream's own retry (DefaultStreamRetry),
	// within which a stream the server ended is open again.
	DefaultLiveLost = 6 * time.Second
)

// PageTimers are the console script's timers, which the pages pass it in
// the body's data-pairing-poll, data-pairing-link and data-live-lost
// (milliseconds); zero fields take the defaults.
type PageTimers struct {
	PairingPoll time.Duration // DefaultPairingPoll
	PairingLink time.Duration // DefaultPairingLink
	LiveLost    time.Duration // DefaultLiveLost
}

func (p *PageTimers) defaults() {
	if p.PairingPoll <= 0 {
		p.PairingPoll = DefaultPairingPoll
	}
	if p.PairingLink <= 0 {
		p.PairingLink = DefaultPairingLink
	}
	if p.LiveLost <= 0 {
		p.LiveLost = DefaultLiveLost
	}
}

// EmailToSMS is how a mail client reaches the e-mail to SMS listener
// (docs/email.md).
type EmailToSMS struct {
	Domain   string // addresses are +E164@Domain
	Port     string // the listener's port
	STARTTLS bool   // a certificate is configured
}

// Phones is the connection hub as the console uses it (gateway.Hub).
type Phones interface {
	// Presence answers, of many devices at once, those online, each with
	// when it was last seen: a live link's last activity (on a cluster, for
	// a link on another node, that node's last beat). devices maps each
	// fingerprint to its device's id: every per-device answer and order is
	// of the device (fingerprint and id), never of another device of the
	// fingerprint (one deleted whose link is not closed yet).
	Presence(devices map[string]uint64) map[string]time.Time
	// Disconnect closes the device's link; the channel is closed once its
	// last seen is stored, for a read right after the answer.
	Disconnect(fingerprint string, deviceID uint64, code int, reason string) <-chan struct{}
	Configure(fingerprint string, deviceID uint64, cfg androidproto.Config)
	Pace(fingerprint string, deviceID uint64, perMinute int)
}

// Analytics is what the overview reads (boltstore.Store).
type Analytics interface {
	Stats(q store.StatsQuery) (store.Stats, error)
	DashboardSummary(companyID uint64, from, to time.Time, limit int) (store.Summary, error)
}

// Period is the company's current billing period (billing.Service).
type Period interface {
	Period(companyID uint64) (from, to time.Time)
}

// Secrets are the server's named keys (store.Backend's Secret): made of
// size random bytes on first use, the same on every node and after a
// restart.
type Secrets interface {
	Secret(name string, size int) ([]byte, error)
}

// Deps are the services behind the console: the API's own.
type Deps struct {
	Accounts *account.Service
	Devices  *device.Service
	SMS      *sms.Service
	// Channels is WhatsApp and iMessage; nil hides their page. The caller
	// wires the Broker to its SetWatcher too.
	Channels *channel.Service
	Webhooks *webhook.Service
	Billing  *billing.Service // nil hides the billing page
	// Media serves the files of received messages; nil shows their names only.
	Media     *media.Service
	Phones    Phones
	Analytics Analytics
	Period    Period
	// Broker carries message changes to the open tabs; the caller wires it
	// to sms.Service.SetWatcher.
	Broker *Broker
	Logger *slog.Logger
	Now    func() time.Time
	// Secrets keeps the key the banners' links are signed with (flash.go),
	// so that a node of a cluster shows what another signed; nil draws a
	// key for the process, which suits one process alone.
	Secrets Secrets
}

// Console is the web console.
type Console struct {
	cfg    Config
	deps   Deps
	pages  map[string]*template.Template
	secure bool
	mux    *http.ServeMux
	flash  *flashSigner
	// refusals answers and logs the requests the store refused
	// (unavailable.go).
	refusals outage.Refusals
}

// New parses the embedded templates and builds the routes.
func New(cfg Config, deps Deps) (*Console, error) {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Timers.defaults()
	if deps.Broker == nil {
		deps.Broker = NewBroker(cfg.Streams, deps.Now) // one clock for the pages and their live events
	}
	flash, err := newFlashSigner(deps.Secrets)
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, deps: deps, secure: account.PublicURLIsHTTPS(cfg.PublicURL), flash: flash}
	if err := c.parse(); err != nil {
		return nil, err
	}
	c.mux = http.NewServeMux()
	c.routes()
	return c, nil
}

// Handler serves the console. It refuses a NUL or bytes that are not UTF-8
// in the address itself (refuseUnstorable), before any page looks a value up.
func (c *Console) Handler() http.Handler { return c.refuseUnstorable(c.mux) }

// Shutdown ends the open live-update streams, which would otherwise hold the
// HTTP server's graceful shutdown until its deadline.
func (c *Console) Shutdown() { c.deps.Broker.Close() }

var funcs = template.FuncMap{
	"ts":  ts,
	"iso": iso,
	// fsi isolates a user's text with U+2068...U+2069 where markup cannot:
	// an attribute (title, data-confirm, aria-label) or an <option>. Inline
	// text takes the "bdi" template of layout.html instead.
	"fsi": bidi.Isolate,
	"day": func(t time.Time) string { return t.UTC().Format(dayLayout) },
	"fieldError": func(f Flash, field string) string {
		if f.Field == field {
			return f.Message
		}
		return ""
	},
	"has": func(list []string, v string) bool {
		for _, s := range list {
			if s == v {
				return true
			}
		}
		return false
	},
	"join": strings.Join,
	// number shows an E.164 number for reading ("+44 7700 900123") and
	// numberType its kind (mobile, fixed_line, ...) where known; anything
	// else (a short code, a name, an e-mail) is shown as it is.
	"number":     numplan.Display,
	"numberType": numplan.Type,
	// kind writes a number type in words: fixed_line is "fixed line".
	"kind":   func(t string) string { return strings.ReplaceAll(t, "_", " ") },
	"price":  price,
	"count":  count,
	"plural": plural,
	"limit":  limit,
	"roles":  func() []string { return roles },
	// companyFields are the settings page's fields of the company, each
	// with its input type and autofill purpose, as the sign-up form's.
	"companyFields": func(co store.Company) []struct{ Name, Label, Value, Type, Autocomplete string } {
		return []struct{ Name, Label, Value, Type, Autocomplete string }{
			{"name", "Name", co.Name, "text", "organization"}, {"phone", "Phone (international format, such as +14155550100)", co.Phone, "tel", "tel"},
			{"address", "Address", co.Address, "text", "street-address"}, {"city", "City", co.City, "text", "address-level2"},
			{"state", "State", co.State, "text", "address-level1"}, {"country", "Country (two letters)", co.Country, "text", "country"},
			{"region", "Region of numbers written without + (two letters, e.g. GB; empty: + required)", co.Region, "text", "off"},
		}
	},
	"channels":       func() []string { return []string{"sms", "whatsapp", "imessage"} },
	"inboundEvents":  func() []string { return inboundEvents },
	"statusEvents":   func() []string { return statusEvents },
	"deviceEvents":   func() []string { return deviceEvents },
	"maxQueueDepth":  func() int { return store.MaxQueueDepth },
	"eventTicked":    eventTicked,
	"typedRow":       typedRow,
	"dec":            func(n int) int { return n - 1 },
	"cancelable":     func(status string) bool { return status == store.MsgScheduled || status == store.MsgQueued },
	"list3":          func() []string { s := androidproto.SIMSlots(); return append(s[:], androidproto.BothSIMs) },
	"simSlots":       func() [2]string { return androidproto.SIMSlots() },
	"poolStrategies": func() []string { return []string{store.PoolRoundRobin, store.PoolLeastLoaded, store.PoolSticky} },
	"seconds":        func(d time.Duration) int64 { return int64(d / time.Second) },
	// ferr is the place of a field's error message, filled by the server
	// after a plain post or by the JavaScript after a fetch.
	"windowDays": func() []string { return []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"} },
	"ferr": func(f Flash, field string) template.HTML {
		msg := ""
		if f.Field == field {
			msg = f.Message
		}
		e := template.HTMLEscapeString
		return template.HTML(`<span class="ferr" data-error-for="` + e(field) + `" id="err-` + e(field) + `">` + e(msg) + `</span>`) //nolint:gosec // escaped
	},
	// ferrAt is ferr in one of a page's forms that repeat a field (each
	// device's name): its id names the form (at), so each input is
	// described by its own form's message, and a plain post's error shows
	// in the form it came from (errAt) alone.
	"ferrAt": func(f Flash, field, at, errAt string) template.HTML {
		msg := ""
		if f.Field == field && at == errAt {
			msg = f.Message
		}
		e := template.HTMLEscapeString
		return template.HTML(`<span class="ferr" data-error-for="` + e(field) + `" id="err-` + e(field) + `-` + e(at) + `">` + e(msg) + `</span>`) //nolint:gosec // escaped
	},
}

// parsedPages is one template set per page, the layout plus the page,
// parsed once for the process: every console serves the same embedded
// files with the same functions, and a template executes from many
// goroutines at once, so consoles share them as their requests do.
var parsedPages = sync.OnceValues(func() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", n, err)
		}
		pages[base] = t
	}
	return pages, nil
})

// parse gives the console its page templates (parsedPages).
func (c *Console) parse() (err error) {
	c.pages, err = parsedPages()
	return err
}

// Flash is an error or notice carried to a page: by the JavaScript without
// a reload, or in the address after a form posted without it.
type Flash struct {
	Message string
	Field   string
	OK      bool
}

// view is what every page template gets.
type view struct {
	Title string
	Page  string
	Nav   []navItem
	User  store.User
	Admin bool
	CSRF  string
	Flash Flash
	// Typed is what a refused plain post's form held, which the page
	// that shows its error fills the form with (typedCookie).
	Typed   Typed
	Data    any
	Company string
	// Timers are Config.Timers, for the body's data attributes.
	Timers PageTimers
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	t, ok := c.pages[page]
	if !ok {
		c.deps.Logger.Error("console: no template", "page", page)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	v.Page = page
	v.Timers = c.cfg.Timers
	if v.Flash == (Flash{}) {
		// v.CSRF is the viewer's token: the session's, or before sign-in
		// the pre-sign-in one.
		v.Flash = c.flash.from(r, v.CSRF)
	}
	v.Typed = c.typed(w, r, v.CSRF, v.Flash)
	secureHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	// The page is drawn whole before its status is written: a template
	// that fails halfway answered its status (200) with half a page, or
	// none, and the failure went to the log alone. Pages are tens of
	// kilobytes (their lists are bounded).
	var buf bytes.Buffer
	if err := t.Execute(&buf, v); err != nil {
		c.deps.Logger.Error("console: render", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError) // its own Content-Type: text/plain
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// secureHeaders: no framing, no inline script, no referrer (tokens ride in
// the address of the e-mailed pages), nothing cached.
func secureHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
}

var errNoDevice = problem.New(problem.NotFound, "No such device.")
