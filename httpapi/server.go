package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/simrelay/simrelay/account"
	androidproto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/logspacing"
	"github.com/simrelay/simrelay/internal/outage"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook"
)

// DefaultAnswerWriteTimeout is how long a request's answer may wait for its
// client to take it, from the request's start: the largest answers (an MCP
// conversation list, about 8 MB) need an average of 47 KB/s, a slow mobile
// link's; a client that stops reading is cut then, and its request with its
// answer goes.
const DefaultAnswerWriteTimeout = 3 * time.Minute

// Config tunes the API.
type Config struct {
	// GeneralRate limits each identity (API key, user, or client IP) across all counted routes.
	GeneralRate pacing.Rate
	// AuthRate limits each client IP on the credential routes (/auth/*, /device/register).
	AuthRate pacing.Rate
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is believed;
	// empty means the socket's peer address is the client.
	TrustedProxies []*net.IPNet
	// AdminToken is the operator's credential for GET /admin/backup; empty
	// turns that route off. It is no account's credential and opens nothing else.
	AdminToken string
	// Backup bounds GET /admin/backup; zero fields take their defaults.
	Backup BackupConfig
	// Export bounds how long a GET /company/export client may keep its
	// stream (and its slot); zero fields take their defaults.
	Export ExportConfig
	// BulkWait is the longest a bulk send waits for one of its company's
	// places (BulksPerCompany); DefaultBulkWait when zero.
	BulkWait time.Duration
	// MCPWait is the longest an MCP request waits for one of its company's
	// places (MCPPerCompany); DefaultMCPWait when zero.
	MCPWait time.Duration
	// ReadWait is the longest a list read (the messages, conversations
	// and inbound lists) waits for one of its company's places
	// (ReadsPerCompany); DefaultReadWait when zero.
	ReadWait time.Duration
	// AnswerWriteTimeout bounds how long a request's answer may wait for
	// its client to take it, from the request's start
	// (DefaultAnswerWriteTimeout when zero): see Server.serve.
	AnswerWriteTimeout time.Duration
	// MaxAddresses bounds the client addresses each rate limit tracks
	// (pacing.DefaultMaxKeys when zero); see Server.general.
	MaxAddresses int
	// PublicURL is the server's address as clients reach it (--public-url):
	// the served OpenAPI document names it as its server. Empty keeps the
	// document's default, the default listen address.
	PublicURL string
	// Version is the server's version, as `simrelay version` prints it:
	// the MCP endpoint's initialize answers it (serverInfo.version).
	// Empty is "devel", a build that knows no version.
	Version string
}

// Backuper is the part of the store the API needs beyond the domain services:
// readiness, the operator's snapshot, and one company's records for its export.
type Backuper interface {
	Snapshot(dir string) (*store.Snapshot, error)
	Ready() error
	Exporter
}

// Bus is the cluster's bus as /readyz asks it (cluster.Bus).
type Bus interface {
	Ready(ctx context.Context) error
}

// Phones is the connection hub as the API uses it (gateway.Hub).
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

// Deps are the services behind the API.
type Deps struct {
	Accounts *account.Service
	Devices  *device.Service
	SMS      *sms.Service
	// Channels is WhatsApp and iMessage; nil leaves their routes answering 404.
	Channels *channel.Service
	// Webhooks is the webhook configuration, signing secret and deliveries log.
	Webhooks *webhook.Service
	// Media is the files of received messages; nil leaves their routes answering 404.
	Media  *media.Service
	Phones Phones
	// PhoneSocket serves GET /device/ws (gateway.Hub).
	PhoneSocket http.Handler
	Store       Backuper
	// Bus is the bus between the nodes of a cluster; nil on one node.
	// /readyz is ready only while it answers.
	Bus Bus
	// Analytics is the message counters and recent activity (boltstore.Store).
	Analytics Analytics
	// Period is the billing period creditsUsed counts over; nil is the UTC calendar month.
	Period Period
	// Billing is plans, subscriptions and limits; nil leaves the billing routes answering 404.
	Billing *billing.Service
	// Console serves the web console (web.Console): /, /console/*, and the
	// pages that e-mailed links open (/verify-email, /reset-password). It
	// refuses a NUL (%00) or bytes that are not UTF-8 in their paths and
	// queries, and a query parameter given twice with different values,
	// itself, with its own error page: the API's refuseUnstorable and
	// refuseRepeated leave them to it.
	Console http.Handler
	// ConsoleIdentity names the signed-in user of a console request (by its
	// session cookie) for the rate limits, so that people behind one office
	// address do not share its window; nil counts console requests by address.
	// It returns the request the console is then given: one that carries
	// the session it resolved, so the console does not read it again.
	ConsoleIdentity func(r *http.Request) (string, *http.Request, bool)
	// Limiters makes the rate-limit windows shared by the nodes of a
	// cluster; nil keeps them in this process's memory (one node).
	Limiters Limiters
	Logger   *slog.Logger
	Registry prometheus.Registerer
	Gatherer prometheus.Gatherer
	Now      func() time.Time
}

// Server is the HTTP API.
type Server struct {
	cfg  Config
	deps Deps
	e    *echo.Echo
	// chain is every request's way through the middleware to its route's
	// handler (serve).
	chain echo.HandlerFunc
	// general counts requests without a credential, by client address; it
	// is capped, since a client picks its address (a whole IPv6 range). Those
	// with a credential count in members, which the store's accounts and
	// devices bound, so that a flood of addresses never pushes an API key
	// or a user into the capped map's shared overflow window.
	general scopeWindows
	members scopeWindows
	auth    scopeWindows
	// preflight counts the OPTIONS requests without a credential (a
	// browser's CORS preflights) by client address, in this node's memory
	// alone: they read nothing, so they spend none of the windows of the
	// requests they stand before, and cost a cluster no write.
	preflight scopeWindows
	// limiterLog spaces the lines of a failing limiter (limits.go).
	limiterLog logspacing.Spacer
	// refusals answers and logs the requests the store refused (errors.go).
	refusals outage.Refusals
	metrics  *metrics
	draining atomic.Bool
	// backups holds a slot per running GET /admin/backup.
	backups chan struct{}
	// exports counts the running GET /company/export streams, by company
	// and in all (exportsMu guards both): a stalled reader holds its
	// stream, its buffer and a page of messages until a deadline ends it.
	exportsMu    sync.Mutex
	exports      map[uint64]int
	exportsTotal int
	// bulks counts the POST /chat/send-bulk under way (company_slots.go).
	bulks *companySlots
	// mcpHandler is the MCP transport and server of POST /mcp.
	mcpHandler http.Handler
	// mcpCalls counts the POST /mcp under way (company_slots.go).
	mcpCalls *companySlots
	// reads counts the list reads under way (company_slots.go).
	reads *companySlots
	// answers keeps analytics answers while the store is not written.
	answers answerCache
	// readiness is what /readyz last found, for its log (readiness.go).
	readiness readiness
	// openAPI is the document GET /openapi.json serves (servedOpenAPI).
	openAPI []byte
}

// New builds the API and its route table.
func New(cfg Config, deps Deps) (*Server, error) {
	if cfg.AdminToken != "" && len(cfg.AdminToken) < MinAdminTokenLen {
		return nil, fmt.Errorf("httpapi: the admin token has %d characters, want at least %d", len(cfg.AdminToken), MinAdminTokenLen)
	}
	cfg.Backup.defaults()
	cfg.Export.defaults()
	if cfg.MaxAddresses <= 0 {
		cfg.MaxAddresses = pacing.DefaultMaxKeys
	}
	if cfg.Version == "" {
		cfg.Version = "devel"
	}
	if cfg.AnswerWriteTimeout <= 0 {
		cfg.AnswerWriteTimeout = DefaultAnswerWriteTimeout
	}
	s := &Server{
		cfg:      cfg,
		deps:     deps,
		backups:  make(chan struct{}, cfg.Backup.AtOnce),
		exports:  map[uint64]int{},
		bulks:    newSlots("bulk sends", BulksPerCompany, cfg.BulkWait, DefaultBulkWait),
		mcpCalls: newSlots("MCP requests", MCPPerCompany, cfg.MCPWait, DefaultMCPWait),
		reads:    newSlots("list reads", ReadsPerCompany, cfg.ReadWait, DefaultReadWait),
	}
	doc, err := servedOpenAPI(cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	s.openAPI = doc
	if err := s.newLimiters(); err != nil {
		return nil, fmt.Errorf("httpapi: rate limits: %w", err)
	}
	m, err := newMetrics(deps.Registry)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.mcpHandler = s.newMCPHandler(s.newMCPTools())
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.renderError
	e.JSONSerializer = compactJSON{}
	e.IPExtractor = echo.ExtractIPDirect()
	if len(cfg.TrustedProxies) > 0 {
		opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, n := range cfg.TrustedProxies {
			opts = append(opts, echo.TrustIPRange(n))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(opts...)
	}
	for _, r := range s.routes() {
		h := s.access(r.access)(r.handler)
		e.Add(r.method, r.path, h)
		// HEAD answers wherever GET does (uptime monitors use it); net/http
		// drops the body, so the handlers need not know.
		if r.method == http.MethodGet {
			e.Add(http.MethodHead, r.path, h)
		}
	}
	s.e = e
	// What Echo's Pre and Use would run, in their order, composed once
	// (serve says why): canonicalPath and hideOperatorRoutes before the
	// routing, the rest after it, around the route's handler.
	s.chain = canonicalPath(hideOperatorRoutes(s.route(
		s.observe(s.recoverPanics(s.identify(s.limit(refuseUnstorable(s.refuseRepeated(callRoute)))))))))
	return s, nil
}

// Handler is the API as an http.Handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// serve is Echo's ServeHTTP with the middleware composed once, in New,
// instead of for every request: Echo v4 wraps each middleware around the
// next anew per request (a closure each, nine on every API call), garbage
// on the path of every send. It runs the same steps: a pooled context,
// the pre-routing middleware, the routing, the middleware and the route's
// handler, and Echo's error handler for an error none of them rendered.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// The answer must be taken within AnswerWriteTimeout of the request's
	// start: net/http sets no write deadline of its own (the server runs
	// without WriteTimeout, which would cut exports and live streams), so
	// the write of an answer to a client that stopped reading waited for
	// ever, holding its goroutine, its connection and the answer (an MCP
	// answer is up to 8 MB). The routes that stream (exports, backups,
	// files, the console's live updates) set their own deadline before
	// each write; net/http clears it once the answer is flushed, and when
	// a phone link hijacks the connection. net/http's own writer takes it
	// by a type assertion (no garbage on every request); a writer wrapped
	// around it (a middleware put in front of Handler) through an
	// http.ResponseController, which unwraps it, rather than going without.
	deadline := time.Now().Add(s.cfg.AnswerWriteTimeout)
	if d, ok := w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		_ = d.SetWriteDeadline(deadline)
	} else {
		_ = http.NewResponseController(w).SetWriteDeadline(deadline)
	}
	c := s.e.AcquireContext()
	c.Reset(r, w)
	if err := s.chain(c); err != nil {
		s.e.HTTPErrorHandler(err, c)
	}
	s.e.ReleaseContext(c)
}

// route finds the request's route (or Echo's not-found, method-not-allowed
// or OPTIONS answer) and sets it, with the path's parameters, on c; or,
// for a path the pre-routing middleware answered (answerUnrouted), sets
// that answer with no route, as on an unknown path.
func (s *Server) route(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if answer, ok := c.Get(keyAnswer).(echo.HandlerFunc); ok {
			c.SetPath("")
			c.SetHandler(answer)
			return next(c)
		}
		r := c.Request()
		s.e.Router().Find(r.Method, echo.GetPath(r), c)
		return next(c)
	}
}

// callRoute runs the handler route found.
func callRoute(c echo.Context) error { return c.Handler()(c) }

// Drain makes /readyz answer 503, so a load balancer stops sending work while
// the server shuts down.
func (s *Server) Drain() { s.draining.Store(true) }

// Sweep drops expired rate-limit windows; the owner calls it now and then.
func (s *Server) Sweep() {
	for _, l := range []scopeWindows{s.general, s.members, s.auth, s.preflight} {
		if err := l.Sweep(); err != nil {
			s.deps.Logger.Warn("rate limits: prune the windows that ended", "err", err)
		}
	}
}

// RouteKeys lists "METHOD /path" of every registered route, in OpenAPI path
// syntax. The HEAD twins of GET routes are left out: OpenAPI implies them.
func (s *Server) RouteKeys() []string {
	var out []string
	for _, r := range s.e.Routes() {
		if r.Method == http.MethodHead {
			continue
		}
		out = append(out, r.Method+" "+openAPIPath(r.Path))
	}
	return out
}

// compactJSON writes every JSON answer compact. Echo indents c.JSON's
// answer for any request with a ?pretty query parameter; that is a
// debugging aid of Echo's, not a part of this API: no document named it, it
// reached only the answers c.JSON writes (not the streamed or pre-encoded
// ones), and it let any caller double the work of a large answer. A client
// that wants the JSON indented pipes it through a formatter (jq). An
// unknown query parameter is ignored, so ?pretty is too.
type compactJSON struct{ echo.DefaultJSONSerializer }

func (compactJSON) Serialize(c echo.Context, i any, _ string) error {
	return echo.DefaultJSONSerializer{}.Serialize(c, i, "")
}

// setLocation gives a 201 the Location of the resource it created, a path
// of this API whose GET answers it: the server's --public-url before the
// path (so that a server behind a proxy under a path prefix names the URL
// clients reach), the path alone when it has none. A pool is the one
// resource created that a GET serves at once: a user, a pool member, an
// opt-out and a device have no GET of their own, an agent's file is served
// only once a message holds it, a pairing code and a signup's account are
// read through routes of their own (GET /device/pairing/{code}/qr.png, GET
// /company); a Location a client would follow to a 404 or a 405 tells it
// nothing the answer's id does not.
func (s *Server) setLocation(c echo.Context, path string) {
	c.Response().Header().Set(echo.HeaderLocation, strings.TrimSuffix(s.cfg.PublicURL, "/")+path)
}
