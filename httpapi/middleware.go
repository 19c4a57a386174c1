package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/nulchar"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Context keys of values the middleware hands to handlers.
const (
	keyPrincipal = "simrelay.principal"
	keyAuthErr   = "simrelay.auth_err"
	keyDevice    = "simrelay.device"     // the store.Device of a valid device token
	keyDeviceErr = "simrelay.device_err" // why a device token names no device (store.ErrNotFound, or the store's failure)
	keyOperator  = "simrelay.operator"
	keyToken     = "simrelay.token"   // the bearer credential of keyPrincipal or keyDevice, as sent
	keyRecheck   = "simrelay.recheck" // *credentialCheck: the route's access check again, once the body is in (readBody) or as an export streams
	keyConsole   = "simrelay.console" // rate-limit identity of a console session
	// keyAnswer is the answer a pre-routing middleware chose for a path
	// no route may serve (an echo.HandlerFunc): route runs it in place of
	// a route's handler, so that it is counted, limited and logged as an
	// unknown route's answer is.
	keyAnswer = "simrelay.answer"
)

// uncounted routes need no credential and count toward no limit: probes and documents.
var uncounted = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true, "/openapi.json": true,
	// The console's stylesheet, script and icons: fixed public files, like the documents.
	"/console/static/*": true, "/favicon.ico": true}

// loggedPath is the path the request log shows for an escaped path: as
// asked, but for a pairing code, a credential that pairs a phone into its
// company (whose sends that phone then gets) until it expires. The code is
// read from the path as the router would read it (decoded, its empty, "."
// and ".." segments cleaned away), so that it is hidden also where the
// route never saw it: //device/pairing/{code}/qr.png (a client's base URL
// ending in a slash), answered with a 308 to the clean path, and
// /device/pairing/{code}/qr.png/, a 404, name a live code as well. Each
// segment of the asked path that holds the code reads xxxxx.
func loggedPath(escaped string) string {
	decoded, err := url.PathUnescape(escaped)
	if err != nil {
		decoded = escaped
	}
	if !mayHoldPairing(decoded) {
		return escaped // every request but the pairing routes': nothing split, nothing kept
	}
	var segs []string
	for _, seg := range strings.Split(decoded, "/") {
		switch seg {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, seg)
		}
	}
	if len(segs) < 3 || !strings.EqualFold(segs[0], "device") || !strings.EqualFold(segs[1], "pairing") {
		return escaped
	}
	code := strings.ToLower(segs[2])
	asked := strings.Split(escaped, "/")
	for i, seg := range asked {
		if d, err := url.PathUnescape(seg); err == nil {
			seg = d
		}
		if strings.Contains(strings.ToLower(seg), code) {
			asked[i] = "xxxxx"
		}
	}
	return strings.Join(asked, "/")
}

// mayHoldPairing is false only for a path with no segment EqualFold to
// "pairing": one of ASCII bytes alone in which "pairing" appears in no
// case. A byte outside ASCII answers true, since Unicode's folding is
// then loggedPath's to judge.
func mayHoldPairing(s string) bool {
	const word = "pairing"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return true
		case c|0x20 == 'p' && len(s)-i >= len(word) && strings.EqualFold(s[i:i+len(word)], word):
			return true
		}
	}
	return false
}

// authScope are the credential routes limited per client IP on top of the general limit.
var authScope = map[string]bool{
	"/auth/login": true, "/auth/refresh": true, "/auth/signup": true, "/auth/verify-email": true,
	"/auth/forgot-password": true, "/auth/reset-password": true, "/device/register": true,
	// The operator's route guards the whole store: every try, right or wrong,
	// spends the client IP's credential window, so it is no token oracle.
	"/admin/backup": true,
}

// observe is the outermost middleware: it renders errors itself so that the
// status it records and logs is the one the client got.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		// Deferred, so that a handler that aborts its response
		// (http.ErrAbortHandler: a stream cut after its status went out)
		// is counted and logged too; otherwise it runs after c.Error.
		defer s.observed(c, start)
		if err := next(c); err != nil {
			c.Error(err)
		}
		return nil
	}
}

// observed counts and logs a request once it is answered.
func (s *Server) observed(c echo.Context, start time.Time) {
	route := c.Path()
	if route == "" || c.Response().Status == http.StatusNotFound && !s.isRoute(c) {
		route = "unmatched"
	}
	d := time.Since(start)
	status := c.Response().Status
	if !operatorRoutes[route] { // the public /metrics must not tell when the operator took a backup
		s.metrics.observe(c.Request().Method, route, status, d)
	}
	if !uncounted[route] {
		// Attrs rather than key-value pairs: the line is the same, and
		// no value is boxed on the heap for it on every request. The
		// path is logged escaped, as asked where canonicalPath kept
		// it (an encoded slash, refused): decoded, /a%2Fb would read
		// as /a/b, a path that was not asked.
		s.deps.Logger.LogAttrs(context.Background(), slog.LevelInfo, "request",
			slog.String("method", c.Request().Method), slog.String("path", loggedPath(c.Request().URL.EscapedPath())),
			slog.Int("status", status), slog.Float64("duration_ms", float64(d.Microseconds())/1000),
			slog.String("ip", c.RealIP()))
	}
}

// canonicalPath runs before routing, so that the router, the limits (which
// classify by the matched route) and the handlers behind it, the console's
// own mux included, all read one path. Echo routes by the raw path while
// the console's mux unescapes each segment: left alone, /console/%73ignin
// would be Echo's /console/* (outside the credential window) and the
// console's sign-in.
//
//   - Percent-encoded characters are decoded: RFC 3986 (6.2.2.2) makes
//     /console/%73ignin the same address as /console/signin, so it is served
//     as that. The router then reads the decoded path, so path parameters
//     come to handlers decoded, once.
//   - An encoded slash (%2F) would change which segments the path has; no
//     route takes one, so it is refused as not found before it can be read
//     two ways.
//   - A path with empty, "." or ".." segments is redirected (308, which
//     keeps the method and the body) to its cleaned form, as net/http's mux
//     does: nothing is served under a second name.
func canonicalPath(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Request().URL
		if u.RawPath != "" {
			if strings.Contains(strings.ToLower(u.RawPath), "%2f") {
				return answerUnrouted(c, next, func(echo.Context) error {
					return problem.New(problem.NotFound, "There is no such route: a path never carries an encoded slash (%2F).")
				})
			}
			u.RawPath = ""
		}
		if !strings.HasPrefix(u.Path, "/") {
			return next(c) // CONNECT's authority: no route takes it
		}
		if clean := cleanPath(u.Path); clean != u.Path {
			to := (&url.URL{Path: clean, RawQuery: u.RawQuery}).String()
			return answerUnrouted(c, next, func(c echo.Context) error {
				return c.Redirect(http.StatusPermanentRedirect, to)
			})
		}
		return next(c)
	}
}

// answerUnrouted has the request answered by answer instead of a route
// (route reads it), after the middleware every unknown route's request
// passes: the answer carries the RateLimit-* headers every counted
// response carries (contract section 10), spends the window, and is
// logged and measured as "unmatched".
func answerUnrouted(c echo.Context, next echo.HandlerFunc, answer echo.HandlerFunc) error {
	c.Set(keyAnswer, answer)
	return next(c)
}

// cleanPath is path.Clean keeping a trailing slash, as net/http's mux cleans.
func cleanPath(p string) string {
	np := path.Clean(p)
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}

// operatorRoutes answer only the operator, and to everyone else exactly as
// a route that does not exist: hideOperatorRoutes and the access check see
// to the answers, observe keeps them out of the public metrics.
var operatorRoutes = map[string]bool{"/admin/backup": true}

// hideOperatorRoutes answers any method but GET and HEAD on an operator
// route (whose answers would be 405 or an OPTIONS list, telling that the
// route exists) as the unknown route it is to everyone but the operator.
// It runs after canonicalPath, so the path it reads is the one routed.
func hideOperatorRoutes(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if operatorRoutes[r.URL.Path] && r.Method != http.MethodGet && r.Method != http.MethodHead {
			// Counted and limited as an unknown route is (answerUnrouted):
			// an answer without its RateLimit-* headers would tell the route.
			return answerUnrouted(c, next, func(echo.Context) error { return echo.ErrNotFound })
		}
		return next(c)
	}
}

func (s *Server) isRoute(c echo.Context) bool {
	for _, r := range s.e.Routes() {
		if r.Path == c.Path() && r.Method == c.Request().Method {
			return true
		}
	}
	return false
}

// recoverPanics turns a panic under it into the request's error: a 500
// internal, whose log line (toProblem) carries the panic's stack, as an MCP
// tool's does (mcpToolHandler). The value alone names no function, and the
// stack is gone once the deferred recovery has returned.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		return next(c)
	}
}

// twoCredentials is the 401's message for Authorization header lines that
// differ: the request names no one credential.
const twoCredentials = "The Authorization header is given more than once, with different values; send one credential."

// identify resolves the bearer credential, if any, without refusing the
// request: the limit needs the identity first, and public routes ignore it.
func (s *Server) identify(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if uncounted[c.Path()] {
			return next(c)
		}
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		if h == "" {
			// A console page: the session's user is the identity. The cookie
			// opens no API route: only the console reads it.
			if consolePaths[c.Path()] && s.deps.ConsoleIdentity != nil {
				if id, r, ok := s.deps.ConsoleIdentity(c.Request()); ok {
					c.Set(keyConsole, id)
					c.SetRequest(r)
				}
			}
			return next(c)
		}
		if nulchar.Differ(c.Request().Header.Values(echo.HeaderAuthorization)) {
			// Two credentials: whichever one a proxy in front logs or checks,
			// the request must not act as the other one.
			c.Set(keyAuthErr, problem.New(problem.Unauthorized, twoCredentials))
			return next(c)
		}
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			c.Set(keyAuthErr, problem.New(problem.Unauthorized, "The Authorization header must be: Bearer <API key or access token>."))
			return next(c)
		}
		token = strings.TrimSpace(token)
		if s.isOperator(token) {
			// The token opens the operator's routes only. It is still checked
			// below like any other, so that everywhere else it answers exactly
			// as a wrong token does and no company route tells it apart.
			c.Set(keyOperator, true)
		}
		if strings.HasPrefix(token, device.TokenPrefix) {
			// A phone's token: its own rate-limit identity, so that many phones
			// behind one office address do not share a window. The hub checks
			// the token again before the upgrade; the agents' upload takes the
			// device found here, or answers why there is none (uploadMedia),
			// and checks the token again once its body is in (recheckDevice).
			d, err := s.deps.Devices.Authenticate(c.Request().Context(), token)
			if err != nil {
				c.Set(keyDeviceErr, err)
				return next(c)
			}
			c.Set(keyDevice, d)
			c.Set(keyToken, token)
			return next(c)
		}
		p, err := s.deps.Accounts.Authenticate(c.Request().Context(), token)
		if err != nil {
			// Even a store failure is only recorded here: the limit still counts the
			// request (by IP) and sets its headers, and the route's access check answers.
			c.Set(keyAuthErr, err)
			return next(c)
		}
		c.Set(keyPrincipal, p)
		c.Set(keyToken, token)
		return next(c)
	}
}

// limit applies the rate limits and sets the RateLimit-* headers on every
// counted response, refusals included.
func (s *Server) limit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if uncounted[c.Path()] {
			return next(c)
		}
		// The client's address key is made only where it counts: a request
		// with a credential counts under its identity, and only the
		// credential routes count its address as well.
		ip := func() string { return addressKey(c.RealIP()) } // an IPv6 client is its /64
		var res pacing.Result
		preflight := false
		if p, ok := c.Get(keyPrincipal).(account.Principal); ok {
			res = s.members.Take(p.Identity())
		} else if d, ok := c.Get(keyDevice).(store.Device); ok {
			res = s.members.Take("device:" + d.Fingerprint)
		} else if user, ok := c.Get(keyConsole).(string); ok {
			res = s.members.Take(user)
		} else if c.Get(keyOperator) == true && operatorRoutes[c.Path()] {
			// Only on the operator's routes: anywhere else the token is
			// the wrong token it is there, counted by address like any
			// other, so that the RateLimit-* headers do not tell it apart.
			res = s.members.Take("operator")
		} else if preflight = isPreflight(c.Request()); preflight {
			// A browser sends one before a cross-origin request of a shape
			// it has not asked about lately, with no credential. It reads
			// nothing (the route table answers it), so it counts in a
			// window of its own, as a gateway answers preflights before its
			// rate limits: a browser app's preflights spend neither its
			// address's window nor its credential tries (one per sign-in),
			// and a flood of them is still refused.
			res = s.preflight.Take(ip())
		} else {
			res = s.general.Take(ip())
		}
		if !preflight && (authScope[c.Path()] || c.Request().Method == http.MethodPost && consoleCredentialPosts[c.Path()]) {
			res = pacing.Nearer(res, s.auth.Take(ip()))
		}
		setRateLimitHeaders(c.Response().Header(), res)
		if !res.Allowed {
			return &problem.Error{Code: problem.RateLimited, RetryAfter: res.ResetSeconds(),
				Message: fmt.Sprintf("Too many requests: the limit is %d in this window. Retry after %s.", res.Limit, problem.Count(res.ResetSeconds(), "second"))}
		}
		return next(c)
	}
}

// isPreflight reports whether r is an OPTIONS request without a credential,
// as a browser's CORS preflight is (the Fetch standard sends none with it).
// One with an Authorization header is counted as any other request of its
// credential, or of its address for a credential that names no one.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && len(r.Header.Values(echo.HeaderAuthorization)) == 0
}

// setRateLimitHeaders sets the RateLimit-* headers of res. They are on
// every counted answer, so they are written as Header.Set would write them
// (its canonical keys) but with one slice for the three values instead of
// one each and no canonicalising of the names per request.
func setRateLimitHeaders(h http.Header, res pacing.Result) {
	// The three numbers are written into one string, which each value is
	// a part of.
	var buf [3 * 20]byte
	b := strconv.AppendInt(buf[:0], int64(res.Limit), 10)
	i := len(b)
	b = strconv.AppendInt(b, int64(res.Remaining), 10)
	j := len(b)
	b = strconv.AppendInt(b, int64(res.ResetSeconds()), 10)
	all := string(b)
	v := []string{all[:i], all[i:j], all[j:]}
	h["Ratelimit-Limit"] = v[0:1:1]
	h["Ratelimit-Remaining"] = v[1:2:2]
	h["Ratelimit-Reset"] = v[2:3:3]
}

// Access levels of a route.
type access int

const (
	public access = iota // no credential
	member               // any user of the company, or the API key
	admin                // admins and the API key
	// operator is the server's operator alone (Config.AdminToken). Everyone
	// else, company admins included, gets the unknown-route 404.
	operator
)

func (s *Server) access(level access) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if level == public {
				return next(c)
			}
			if level == operator {
				if c.Get(keyOperator) != true {
					return echo.ErrNotFound
				}
				return next(c)
			}
			p, ok := c.Get(keyPrincipal).(account.Principal)
			if !ok {
				if err, ok := c.Get(keyAuthErr).(error); ok {
					return err
				}
				return problem.New(problem.Unauthorized, "This route needs Authorization: Bearer <API key or access token>.")
			}
			if level == admin && !p.IsAdmin() {
				return problem.New(problem.Forbidden, "Only admins may do this.")
			}
			c.Set(keyRecheck, &credentialCheck{s: s, c: c, level: level})
			return next(c)
		}
	}
}

// credentialCheck is the route's access check, kept on the request's
// context (keyRecheck) with the level the route demanded, so that every
// later check of the request's credential asks for that same level: once
// its body has arrived (again), and while its answer streams (still).
type credentialCheck struct {
	s     *Server
	c     echo.Context
	level access
}

// again authenticates the request's credential again and repeats the
// route's role check, for readBody once the body has arrived. The check
// of access ran when the headers came, and a body may take up to the
// server's read timeout (a minute) to follow: a request sent with an API
// key rotated in the meantime, or by a user deleted or demoted, must not
// act after the change answered, any more than a request sent after it.
// An API key's check is its node's cache (the rotation empties it); an
// access token's reads its user again.
func (k *credentialCheck) again() error { return k.check(k.s.deps.Accounts.Authenticate) }

// still is again for a request that runs on after its body (a company
// export, for as long as its client takes it): it rechecks with
// Reauthenticate, so the expiry of its access token since it was let in
// ends nothing, while a revocation does.
func (k *credentialCheck) still() error { return k.check(k.s.deps.Accounts.Reauthenticate) }

func (k *credentialCheck) check(auth func(context.Context, string) (account.Principal, error)) error {
	tok, _ := k.c.Get(keyToken).(string)
	p, err := auth(k.c.Request().Context(), tok)
	if err != nil {
		return err
	}
	if k.level == admin && !p.IsAdmin() {
		return problem.New(problem.Forbidden, "Only admins may do this.")
	}
	// The same principal, as nearly always, is kept as it is: setting it
	// again would box another copy on the heap.
	if had, ok := k.c.Get(keyPrincipal).(account.Principal); !ok || had != p {
		k.c.Set(keyPrincipal, p)
	}
	return nil
}

// principal is the caller of an authenticated route.
func principal(c echo.Context) account.Principal {
	p, _ := c.Get(keyPrincipal).(account.Principal)
	return p
}

// refuseUnstorable answers a request whose path or query holds U+0000
// (%00) or bytes that are not UTF-8 (%FF) before a handler looks the value
// up: no id, name or number the API stores holds either (a JSON body's bad
// bytes are decoded as U+FFFD), and PostgreSQL (the store of a cluster)
// cannot even compare a text with them, so every route that looked one up
// answered 500 there. A path id is what no object has (404, as bbolt
// answered), whether or not the route takes the method; a query parameter
// gets the 400 a body holding a NUL gets, naming the parameter.
// The console's paths are left to the console (Deps.Console), which
// refuses a NUL with its own error page for a person in a browser.
func refuseUnstorable(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if consolePaths[c.Path()] || c.Get(keyAnswer) != nil {
			// A path answered before routing (answerUnrouted) looks
			// nothing up: a redirect leaves the NUL to the page it leads
			// to, the console's own error page for a console path.
			return next(c)
		}
		// The path, not its parameters: a route's own segments never hold
		// a NUL, and a path a route does not take with this method (405)
		// or no route takes (404) has no parameters to read, yet its
		// answer would echo the path, NUL and all.
		// The query is parsed through Echo's QueryParams, which keeps the
		// map for the handler's QueryParam: parsed once per request, and
		// not at all when there is none.
		u := c.Request().URL
		f, ok := nulchar.Path(u.Path)
		if !ok && u.RawQuery != "" {
			if name, bad := nulchar.Malformed(u.RawQuery); bad {
				return problem.Invalid(name, "is not well formed in the address: a % must be followed by two hex digits, and ; separates no parameters (write %25 and %3B)")
			}
			f, ok = nulchar.Values(c.QueryParams())
		}
		switch {
		case !ok:
			return next(c)
		case f.Part == nulchar.InParam:
			return problem.Invalid(f.Param, f.Message())
		case f.Cause == nulchar.NUL:
			return problem.New(problem.NotFound, "No such resource: no id holds the NUL character (%00).")
		}
		return problem.New(problem.NotFound, "No such resource: every id is UTF-8 text.")
	}
}

// refuseRepeated answers 400 for a request to a route that gives a query
// parameter more than once with different values, or the Content-Type
// header, or, on the send routes, which read it, the Idempotency-Key
// header. The routes read one value of each (the first), so the others
// were dropped without a word: ?devices=a&devices=b, the way many clients
// write a list, filtered on a alone; a second Idempotency-Key line (which
// a proxy may join to the first with a comma, a key of its own) decided
// which key a retry matched; and of two Content-Type lines the first said
// what the body was (the media type an upload is stored and served with,
// the charset a body is checked against, what /mcp takes) while a proxy
// or a filter in front may have gone by the other. The same value given
// twice means one thing and is taken. An unknown path keeps its 404 and a
// method a route does not take its 405; the console's paths are left to
// the console, which refuses the same in its own words.
func (s *Server) refuseRepeated(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if consolePaths[c.Path()] || c.Get(keyAnswer) != nil {
			return next(c)
		}
		h := c.Request().Header
		var pe *problem.Error
		switch {
		case idempotentRoutes[c.Path()] && nulchar.Differ(h.Values("Idempotency-Key")):
			pe = problem.Invalid("Idempotency-Key", "is given in more than one header, with different values; send one key")
		case nulchar.Differ(h.Values(echo.HeaderContentType)):
			pe = problem.Invalid(echo.HeaderContentType, "is given in more than one header, with different values; send one, the media type of the body")
		case c.Request().URL.RawQuery != "":
			if param, repeated := nulchar.Repeated(c.QueryParams(), nil); repeated {
				pe = problem.Invalid(param, "is given more than once in the address, with different values; give it once (a list is one value, its items separated by commas)")
			} else if param, differs := pathAndQueryDiffer(c); differs {
				pe = problem.Invalid(param, "is given in the path and again in the query, with another value; give it once")
			}
		}
		if pe == nil || !s.isRoute(c) {
			return next(c)
		}
		return pe
	}
}

// pathAndQueryDiffer names a parameter of the route's path that the query
// gives again with another value: DELETE /opt-outs/{phone}?phone=X took the
// path's number off the list and dropped X, which the query form of the
// same route would have taken. A leading space before more is read as the
// "+" it was (an unencoded + in a query), as the routes read a number.
func pathAndQueryDiffer(c echo.Context) (string, bool) {
	q := c.QueryParams()
	for i, name := range c.ParamNames() {
		vs, ok := q[name]
		if !ok || i >= len(c.ParamValues()) {
			continue
		}
		p := plusOfSpace(c.ParamValues()[i])
		for _, v := range vs {
			if plusOfSpace(v) != p {
				return name, true
			}
		}
	}
	return "", false
}

// idempotentRoutes are the routes that read the Idempotency-Key header.
var idempotentRoutes = map[string]bool{"/chat/send": true, "/automation/send-sms": true, "/chat/send-bulk": true,
	"/whatsapp/send": true, "/imessage/send": true}
