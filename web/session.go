package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/clientgone"
	"github.com/simrelay/simrelay/internal/nulchar"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Cookies of the console. Both are HttpOnly and SameSite=Lax, and Secure
// when the public URL is https; then their names carry the __Host- prefix
// (cookieName).
const (
	sessionCookie = "simrelay_session"
	// anonCookie holds the CSRF token of the forms shown before sign-in
	// (double submit): it stops another site from signing a browser in to
	// an account of the attacker's choosing.
	anonCookie = "simrelay_csrf"
	// csrfHeader carries the token on the JavaScript's requests; forms send
	// it as the csrf field.
	csrfHeader = "X-CSRF-Token"
	// maxFormBytes bounds a form as the API bounds a JSON body.
	maxFormBytes = 1 << 20
)

// req is one authenticated console request.
type req struct {
	sess account.ConsoleSession
	user store.User
}

func (q *req) p() account.Principal { return q.sess.Principal }

func (c *Console) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: c.cookieName(name), Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: c.secure, SameSite: http.SameSiteLaxMode})
}

// cookieName is the name a console cookie is set and read under. On https
// it carries the __Host- prefix: a browser then takes the cookie only from
// this host, over https, for Path=/ and without a Domain, so a neighbouring
// host of the same site (evil.example.com beside sms.example.com) or a
// plain-http page on the way cannot plant one. A planted pre-sign-in token
// with the same value in a forged form would sign a browser in to the
// attacker's account (both halves of the double submit were the
// attacker's), and a planted session cookie would do it without a form.
// Plain http has no such guard, which is one reason to serve the console
// over https.
func (c *Console) cookieName(name string) string {
	if c.secure {
		return "__Host-" + name
	}
	return name
}

// authenticate resolves the session cookie and loads the user. A session
// Identity resolved for the same request (the API's rate limit asks it
// first) is not read again.
func (c *Console) authenticate(r *http.Request) (*req, error) {
	ck, err := r.Cookie(c.cookieName(sessionCookie))
	if err != nil {
		return nil, problem.New(problem.Unauthorized, "Your session has ended. Sign in again.")
	}
	sess, ok := resolvedSession(r, ck.Value)
	if !ok {
		if sess, err = c.deps.Accounts.ConsoleAuthenticate(r.Context(), ck.Value); err != nil {
			return nil, err
		}
	}
	u, err := c.deps.Accounts.Me(r.Context(), sess.Principal)
	if err != nil {
		return nil, err
	}
	return &req{sess: sess, user: u}, nil
}

// Identity names the signed-in user of a request for the API's rate limits
// (httpapi.Deps.ConsoleIdentity): the same key as the user's own API calls.
// The request it returns carries the session it resolved, for authenticate:
// one console request reads (and touches) its session once.
func (c *Console) Identity(r *http.Request) (string, *http.Request, bool) {
	ck, err := r.Cookie(c.cookieName(sessionCookie))
	if err != nil {
		return "", r, false
	}
	sess, err := c.deps.Accounts.ConsoleAuthenticate(r.Context(), ck.Value)
	if err != nil {
		return "", r, false
	}
	return sess.Principal.Identity(), r.WithContext(context.WithValue(r.Context(), sessionKey{}, resolved{cookie: ck.Value, sess: sess})), true
}

// sessionKey keys the session Identity resolved in a request's context.
type sessionKey struct{}

type resolved struct {
	cookie string // the session cookie it was resolved from
	sess   account.ConsoleSession
}

// resolvedSession is the session Identity resolved from cookie for r.
func resolvedSession(r *http.Request, cookie string) (account.ConsoleSession, bool) {
	v, ok := r.Context().Value(sessionKey{}).(resolved)
	if !ok || v.cookie != cookie {
		return account.ConsoleSession{}, false
	}
	return v.sess, true
}

// wantsJSON tells the console's JavaScript (which asks for JSON) from a
// plain form post.
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// csrfOK says whether the request carries want, the session's (or the
// pre-sign-in) CSRF token: at least one token is given, in the header
// X-CSRF-Token or the form field csrf, and every one given is want. The
// script sends both, alike; a header line or a field that holds another
// token is a wrong token whatever the others hold, as two csrf fields with
// different values are refused (refuseRepeated): the header was read
// alone, and a wrong field beside it was dropped without a word.
func csrfOK(r *http.Request, want string) bool {
	given := false
	for _, v := range r.Header.Values(csrfHeader) {
		if v == "" {
			continue
		}
		if !sameToken(want, v) {
			return false
		}
		given = true
	}
	if v := r.PostFormValue("csrf"); v != "" {
		if !sameToken(want, v) {
			return false
		}
		given = true
	}
	return given
}

func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

var errCSRF = problem.New(problem.Forbidden, "This form's security token is missing or out of date. Reload the page and try again.")

// anonCSRF returns the pre-sign-in CSRF token, setting its cookie when absent.
func (c *Console) anonCSRF(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(c.cookieName(anonCookie)); err == nil && len(ck.Value) >= 32 {
		return ck.Value
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	c.setCookie(w, anonCookie, tok, 0)
	return tok
}

func (c *Console) checkAnonCSRF(r *http.Request) error {
	ck, err := r.Cookie(c.cookieName(anonCookie))
	if err != nil || !csrfOK(r, ck.Value) {
		return errCSRF
	}
	return nil
}

// outcome is what a successful action answers: where to go next, a notice,
// and for the JavaScript any data the page updates itself with.
type outcome struct {
	Redirect string `json:"redirect,omitempty"`
	Notice   string `json:"notice,omitempty"`
	// Sig signs Notice for the address the JavaScript goes to next.
	Sig  string `json:"sig,omitempty"`
	Data any    `json:"data,omitempty"`
	// bind, when set, is the token of the browser the notice is for, when
	// that is not the one the action ran under (sign-out ends the session).
	bind string
}

type level int

const (
	anyone level = iota // before sign-in
	member
	admin
)

// page serves a GET page to a signed-in user; a visitor without a session
// goes to the sign-in page and comes back after. The console's script,
// which asks for JSON (a thread's reload, the pairing panel's poll), gets
// the contract's error body instead, 401 for a session that ended, which
// it can act on: a redirect would hand it the sign-in page's HTML, which
// fetch follows and reads as a failed parse. Every other refusal is the
// error body to it too (fail).
func (c *Console) page(lv level, fn func(w http.ResponseWriter, r *http.Request, q *req) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := c.authenticate(r)
		if err != nil {
			if wantsJSON(r) {
				c.answerJSON(w, r, err)
				return
			}
			if pe, ok := problem.As(err); ok && pe.Code == problem.Unauthorized {
				http.Redirect(w, r, Prefix+"/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.fail(w, r, nil, err)
			return
		}
		if lv == admin && !q.p().IsAdmin() {
			c.fail(w, r, q, problem.New(problem.Forbidden, "Only admins may open this page."))
			return
		}
		if err := fn(w, r, q); err != nil {
			c.fail(w, r, q, err)
		}
	}
}

// action serves a POST: session (or the pre-sign-in token), CSRF and role
// first, then fn. back is the page a plain form returns to with the error.
func (c *Console) action(lv level, back string, fn func(w http.ResponseWriter, r *http.Request, q *req) (outcome, error)) http.HandlerFunc {
	return c.actionAt(lv, func(*http.Request) string { return back }, fn)
}

// actionAt is action for a form whose page depends on the request (a
// number's own page, a device's thread): backOf says which, so that a
// plain post's error comes back beside the field it names, on the page the
// form was on. It reads the address and the form only as the page's own
// links write them (r.PostForm, parsed or not, never parsed again); the
// session is not read yet.
func (c *Console) actionAt(lv level, backOf func(r *http.Request) string, fn func(w http.ResponseWriter, r *http.Request, q *req) (outcome, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if pe := repeatedContentType(r); pe != nil {
			c.refuse(w, r, pe)
			return
		}
		err := r.ParseForm()
		back := backOf(r)
		if err != nil {
			c.answerErr(w, r, lv, nil, back, problem.New(problem.ValidationFailed, "The form could not be read."))
			return
		}
		if pe := repeatedField(r.PostForm); pe != nil {
			c.refuse(w, r, pe)
			return
		}
		var q *req
		if lv == anyone {
			if err := c.checkAnonCSRF(r); err != nil {
				c.answerErr(w, r, lv, q, back, err)
				return
			}
		} else {
			var err error
			if q, err = c.authenticate(r); err != nil {
				c.answerErr(w, r, lv, q, back, err)
				return
			}
			if !csrfOK(r, q.sess.CSRF) {
				c.answerErr(w, r, lv, q, back, errCSRF)
				return
			}
			if lv == admin && !q.p().IsAdmin() {
				c.answerErr(w, r, lv, q, back, problem.New(problem.Forbidden, "Only admins may do this."))
				return
			}
		}
		if err := formNUL(r); err != nil {
			c.answerErr(w, r, lv, q, back, err)
			return
		}
		out, err := fn(w, r, q)
		if err != nil {
			if tok := r.PostFormValue("token"); lv == anyone && tok != "" {
				back = withQuery(back, "token", tok) // the e-mailed page needs its token back
			}
			c.answerErr(w, r, lv, q, back, err)
			return
		}
		if out.bind == "" {
			out.bind = c.bindOf(r, lv, q)
		}
		if wantsJSON(r) {
			if out.Notice != "" {
				out.Sig = c.flash.sign(out.bind, "ok", out.Notice, "")
			}
			writeJSON(w, http.StatusOK, out)
			return
		}
		to := out.Redirect
		if to == "" {
			to = back
		}
		if out.Notice != "" {
			to = c.flash.notice(to, out.bind, out.Notice)
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}

// bindOf is the token a flash for this request's browser is bound to: the
// session's CSRF token, or for the pages before sign-in the pre-sign-in one.
// q is nil where the session was not read (yet).
func (c *Console) bindOf(r *http.Request, lv level, q *req) string {
	if lv == anyone {
		if ck, err := r.Cookie(c.cookieName(anonCookie)); err == nil {
			return ck.Value
		}
		return ""
	}
	if q == nil {
		var err error
		if q, err = c.authenticate(r); err != nil {
			return ""
		}
	}
	return q.sess.CSRF
}

func withQuery(path, k, v string) string {
	u, err := url.Parse(path)
	if err != nil {
		return path
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

// toProblem is the API's rule: a *problem.Error goes out as it is (its
// field named for people, fieldName), a store
// that cannot take the request now is a 503 (storeProblem), anything else
// is a logged 500 with a generic message.
func (c *Console) toProblem(r *http.Request, err error) *problem.Error {
	if pe, ok := problem.As(err); ok {
		return pe.Named(fieldName(pe.Field))
	}
	if pe, ok := c.storeProblem(err); ok {
		return pe
	}
	var be *store.BudgetError
	if errors.As(err, &be) {
		return problem.New(problem.StorageBudgetExceeded, "The company has used its storage budget for today (UTC).")
	}
	c.deps.Logger.Error("console request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	return problem.New(problem.Internal, "Something went wrong on the server. Try again.")
}

// clientGone answers a request whose client closed its connection while
// the request waited (clientgone.Is: on the store, on a link's last seen)
// as the API does: nothing failed here and nobody reads an answer, so it is
// recorded 499 and logged at debug, not answered 500 and logged as
// "console request failed"; true. False, and nothing written, for any
// other error.
func (c *Console) clientGone(w http.ResponseWriter, r *http.Request, err error) bool {
	if !clientgone.Is(r, err) {
		return false
	}
	c.deps.Logger.Debug("console request ended by its client", "method", r.Method, "path", r.URL.Path)
	w.WriteHeader(clientgone.Status)
	return true
}

// answerJSON answers a failed request of the JavaScript with the
// contract's error body (nothing, 499, where its client went away).
func (c *Console) answerJSON(w http.ResponseWriter, r *http.Request, err error) {
	if c.clientGone(w, r, err) {
		return
	}
	pe := c.toProblem(r, err)
	retryAfter(w, pe)
	writeJSON(w, pe.Status(), pe)
}

// answerErr answers a failed action: the contract's error body for the
// JavaScript, or back to the form with the message for a plain post. q is
// the request's session as the action read it, nil where it was not read.
func (c *Console) answerErr(w http.ResponseWriter, r *http.Request, lv level, q *req, back string, err error) {
	if c.clientGone(w, r, err) {
		return
	}
	pe := c.toProblem(r, err)
	if wantsJSON(r) {
		retryAfter(w, pe)
		writeJSON(w, pe.Status(), pe)
		return
	}
	if wholeRefusal(pe) {
		// A refusal (a stale or forged form, an action above the user's
		// role) is nothing to correct in the form: the status says so too.
		c.fail(w, r, nil, pe)
		return
	}
	var bind string
	if pe.Code == problem.Unauthorized {
		// The sign-in page shows it, to the browser's pre-sign-in token.
		back, bind = Prefix+"/signin", c.anonCSRF(w, r)
	} else {
		bind = c.bindOf(r, lv, q)
		c.keepTyped(w, r, bind, c.flash.sign(bind, "err", pe.Message, pe.Field), pe.Field)
	}
	http.Redirect(w, r, c.flash.failure(back, bind, pe.Message, pe.Field), http.StatusSeeOther)
}

// wholeRefusal says whether a plain post's refusal is of the request
// itself (its form's token, the user's role, sign-up closed), answered
// with the error page and its 403, rather than of what the form asked,
// which comes back to the form's page with the message, as a 400 or a 409
// does: a send through a paused number, to a number on the opt-out list,
// from a disabled device or with a SIM the device does not have (all 403
// on the API) came to the error page, the form and its page gone, when
// posted before the page's script had loaded (or without it).
func wholeRefusal(pe *problem.Error) bool {
	switch pe.Code {
	case problem.Forbidden, problem.UserTokenRequired, problem.SignupClosed:
		return true
	}
	return false
}

// fail renders an error page for a GET; to the console's script, which
// asks for JSON (a thread's reload, the pairing panel's poll), it answers
// the contract's error body instead, which the script reads and shows: an
// HTML page is nothing it can read.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, q *req, err error) {
	if wantsJSON(r) {
		c.answerJSON(w, r, err)
		return
	}
	if c.clientGone(w, r, err) {
		return
	}
	pe := c.toProblem(r, err)
	retryAfter(w, pe)
	v := view{Title: "Error", Flash: Flash{Message: pe.Message}, Data: pe}
	if q != nil {
		v = c.viewFor(q, "Error", pe)
		v.Flash = Flash{Message: pe.Message}
	}
	c.render(w, r, pe.Status(), "error", v)
}

// retryAfter says when to ask again, as the API does, for a refusal that
// names the time (a file's download beyond the company's 32 under way).
func retryAfter(w http.ResponseWriter, pe *problem.Error) {
	if pe.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(pe.RetryAfter))
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// repeatedContentType refuses a form post with two Content-Type lines that
// differ, as the API refuses such a request: the form was read by the first
// (url-encoded or multipart), while a proxy or filter in front may have gone
// by the other. Such a post is no browser's; it gets the console's 400 page
// before anything of it is read.
func repeatedContentType(r *http.Request) *problem.Error {
	if !nulchar.Differ(r.Header.Values("Content-Type")) {
		return nil
	}
	return problem.Invalid("Content-Type", "The form is sent with more than one Content-Type header, with different values; send one.")
}

// repeatedField refuses a form that gives one of its fields twice with
// different values, naming the first such field by name (the same every
// time), as a query parameter given so is refused (refuseUnstorable): an
// action reads one value of each field, the first, so the other was
// dropped without a word; of two csrf fields the first alone was checked.
// The console's forms never repeat a field but the lists of ticked boxes
// (listField); so the post was made by hand, and gets the console's 400
// page before the session and its token are checked. The same value given
// twice means one thing and is taken.
func repeatedField(form url.Values) *problem.Error {
	name, found := nulchar.Repeated(form, listField)
	if !found {
		return nil
	}
	return problem.Invalid(name, fmt.Sprintf("The form gives the field %q more than once, with different values; give it once.", name))
}

// listField says whether the console's forms send the field once per
// ticked box, to be read as a list: a pool's members, a send's window
// days, and a webhook row's SIMs, channels and events.
func listField(name string) bool {
	switch name {
	case "members", "window_days":
		return true
	}
	row, item, ok := strings.Cut(name, "].")
	return ok && strings.HasPrefix(row, "webhooks[") && (item == "sims" || item == "channels" || item == "events")
}

// formNUL refuses a form whose fields hold U+0000, naming the first one,
// as the API refuses it in a JSON body: it means nothing in a name, a
// number or a message, and PostgreSQL (the store of a cluster) cannot hold
// it, so an action would store it on one store and fail on the other.
func formNUL(r *http.Request) error {
	if f, ok := nulchar.Values(r.Form); ok {
		return problem.Invalid(f.Param, f.Message())
	}
	return nil
}
