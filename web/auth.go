package web

import (
	"net/http"
	"strings"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/problem"
)

// authRoutes are the pages before sign-in. Their POSTs are listed in the
// API's credential scope, so they spend the client address's auth window
// exactly as POST /auth/login and its siblings do.
func (c *Console) authRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"/signin", c.anonPage("signin", "Sign in"))
	mux.HandleFunc("POST "+Prefix+"/signin", c.action(anyone, Prefix+"/signin", c.signin))
	mux.HandleFunc("GET "+Prefix+"/signup", c.anonPage("signup", "Create an account"))
	mux.HandleFunc("POST "+Prefix+"/signup", c.action(anyone, Prefix+"/signup", c.signup))
	mux.HandleFunc("GET "+Prefix+"/forgot-password", c.anonPage("forgot", "Forgot password"))
	mux.HandleFunc("POST "+Prefix+"/forgot-password", c.action(anyone, Prefix+"/forgot-password", c.forgot))
	// The e-mailed links: the page asks for a click (or a new password), so
	// a mail scanner that prefetches the link spends nothing.
	mux.HandleFunc("GET /verify-email", c.anonPage("verify", "Verify your e-mail"))
	mux.HandleFunc("POST /verify-email", c.action(anyone, "/verify-email", c.verify))
	mux.HandleFunc("GET /reset-password", c.anonPage("reset", "Set your password"))
	mux.HandleFunc("POST /reset-password", c.action(anyone, "/reset-password", c.reset))
	mux.HandleFunc("POST "+Prefix+"/signout", c.signoutRoute())
	mux.HandleFunc("GET "+Prefix+"/session", c.page(member, c.session))
}

// sessionState is what a page's script learns of the browser's session
// after its own ended (session): whose it is, and its CSRF token.
type sessionState struct {
	User uint64 `json:"user"`
	CSRF string `json:"csrf"`
}

// session tells a page whose session ended while it was open (a tab left
// for a day, a sign-out elsewhere) of the session the browser holds now,
// once the person has signed in again in another tab, as the page asks
// them to: its forms carry the ended session's CSRF token, which the new
// session refuses, so without the new one the form kept for them could
// only be sent after a reload that lost it. The page takes the token only
// if the session is its own user's (console.js): a form filled in for one
// user, or company, is never sent as another. A script of another site
// cannot read the answer (no CORS, and the SameSite cookie stays home), and
// it is never cached; without a session it is the 401 of every script's
// request.
func (c *Console) session(w http.ResponseWriter, r *http.Request, q *req) error {
	writeJSON(w, http.StatusOK, sessionState{User: q.user.ID, CSRF: q.sess.CSRF})
	return nil
}

type anonData struct {
	Token string
	Next  string
	// Signup says whether strangers may sign up (serve --signup): closed,
	// the sign-in page has no link to the sign-up page, and that page says
	// sign-up is closed instead of showing its form.
	Signup bool
}

func (c *Console) anonPage(page, title string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := view{Title: title, CSRF: c.anonCSRF(w, r), Data: anonData{Token: query(r).Get("token"), Next: safeNext(query(r).Get("next")),
			Signup: c.deps.Accounts.SignupOpen()}}
		c.render(w, r, http.StatusOK, page, v)
	}
}

// safeNext keeps a return address on this console's pages, never another
// site nor another path of this one, as a browser reads the address: it
// drops tabs and newlines before reading it, takes a backslash for a
// slash, and takes a path segment that is . or .., written plainly or
// percent-encoded (%2e), for a step up, so /console/../x and
// /console/%2e%2e/x open /x. An address holding any of them, or another
// control character, goes to the console's overview.
func safeNext(next string) string {
	home := Prefix + "/"
	if !strings.HasPrefix(next, home) || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') {
		return home
	}
	for _, r := range next {
		if r < 0x20 || r == 0x7f {
			return home
		}
	}
	path := next
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	for _, seg := range strings.Split(path, "/") {
		if s := strings.ToLower(seg); s == "." || s == ".." || s == "%2e" || s == ".%2e" || s == "%2e." || s == "%2e%2e" {
			return home
		}
	}
	return next
}

func (c *Console) signin(w http.ResponseWriter, r *http.Request, _ *req) (outcome, error) {
	ctx := account.WithDevice(r.Context(), account.PresentedDevice(r))
	sess, err := c.deps.Accounts.ConsoleSignIn(ctx, r.PostFormValue("email"), r.PostFormValue("password"))
	if pe, ok := problem.As(err); ok && pe.Code == problem.EmailNotVerified {
		// A lost verification mail has no "send it again": the reset link
		// the sign-in page offers verifies the address too (ResetPassword).
		out := *pe
		out.Message += ` No message? "Forgot your password?" below e-mails a link that verifies the address too.`
		return outcome{}, &out
	}
	if err != nil {
		return outcome{}, err
	}
	c.endReplaced(r, sess.ID)
	c.setCookie(w, sessionCookie, sess.ID, 0)
	http.SetCookie(w, account.DeviceHTTPCookie(sess.Device, c.cfg.PublicURL, r))
	c.setCookie(w, anonCookie, "", -1)
	return outcome{Redirect: safeNext(r.PostFormValue("next"))}, nil
}

// endReplaced ends the session the browser's cookie named before a new
// sign-in replaced it (signing in as another user in the same browser), so
// that it does not stay open, unseen, until it idles out. The cookie is the
// proof: only the session whose id the browser holds is ended, and only a
// session that still stands (ConsoleCheck, which leaves its idle clock
// alone); an unknown or ended one names nothing to end. A store that cannot
// end it now leaves it to its idle time, as before, and the sign-in stands.
func (c *Console) endReplaced(r *http.Request, fresh string) {
	ck, err := r.Cookie(c.cookieName(sessionCookie))
	if err != nil || ck.Value == "" || ck.Value == fresh {
		return
	}
	if _, err := c.deps.Accounts.ConsoleCheck(r.Context(), ck.Value); err != nil {
		return
	}
	if err := c.deps.Accounts.ConsoleSignOut(r.Context(), ck.Value); err != nil {
		c.deps.Logger.Warn("console: the session a sign-in replaced could not be ended", "err", err)
	}
}

func (c *Console) signup(w http.ResponseWriter, r *http.Request, _ *req) (outcome, error) {
	// Closed, every sign-up gets the API's 403, its fields unread.
	if err := c.deps.Accounts.CheckSignup(); err != nil {
		return outcome{}, err
	}
	f := r.PostFormValue
	if f("owner.password") != f("password2") {
		return outcome{}, problem.Invalid("password2", "The two passwords differ: type the same one in both fields.")
	}
	_, _, err := c.deps.Accounts.Signup(r.Context(), account.SignupInput{
		Company: account.CompanyInput{Name: f("company.name"), Phone: f("company.phone"), Country: f("company.country")},
		Owner: account.OwnerInput{FirstName: f("owner.firstName"), LastName: f("owner.lastName"), Email: f("owner.email"),
			Password: f("owner.password")},
	})
	if err != nil {
		return outcome{}, err
	}
	return outcome{Redirect: Prefix + "/signin", Notice: "Account created. Open the link we e-mailed you to verify your address, then sign in."}, nil
}

func (c *Console) forgot(w http.ResponseWriter, r *http.Request, _ *req) (outcome, error) {
	if err := c.deps.Accounts.ForgotPassword(r.Context(), r.PostFormValue("email")); err != nil {
		return outcome{}, err
	}
	return outcome{Redirect: Prefix + "/signin", Notice: "If the address belongs to an account, a link to set a new password is on its way."}, nil
}

func (c *Console) verify(w http.ResponseWriter, r *http.Request, _ *req) (outcome, error) {
	if err := c.deps.Accounts.VerifyEmail(r.Context(), r.PostFormValue("token")); err != nil {
		return outcome{}, err
	}
	return outcome{Redirect: Prefix + "/signin", Notice: "E-mail address verified. You can sign in now."}, nil
}

func (c *Console) reset(w http.ResponseWriter, r *http.Request, _ *req) (outcome, error) {
	if r.PostFormValue("password") != r.PostFormValue("password2") {
		return outcome{}, problem.Invalid("password2", "The two passwords differ: type the same one in both fields.")
	}
	if err := c.deps.Accounts.ResetPassword(r.Context(), r.PostFormValue("token"), r.PostFormValue("password")); err != nil {
		return outcome{}, err
	}
	return outcome{Redirect: Prefix + "/signin", Notice: "Password set; every earlier session was signed out. Sign in with the new password."}, nil
}

// signoutRoute signs the browser out. A session that already ended (idle
// for 12 hours, signed out elsewhere) is signed out as well: the cookie
// goes and the browser goes to the sign-in page, saying so. It was refused
// as the session's end, the 401 of every action, and a person who came
// back to a tab left open and clicked "Sign out" stayed on the page, its
// data still shown, told to sign in again. Nothing of a session is left to
// end, so there is no token to check (another site's forged sign-out can
// only clear a cookie that names nothing); a session that stands is signed
// out as every action runs, its token checked.
func (c *Console) signoutRoute() http.HandlerFunc {
	act := c.action(member, Prefix+"/signin", c.signout)
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := c.authenticate(r); err != nil {
			if pe, ok := problem.As(err); ok && pe.Code == problem.Unauthorized {
				c.setCookie(w, sessionCookie, "", -1)
				bind, msg := c.anonCSRF(w, r), "Signed out: the session had already ended."
				if wantsJSON(r) {
					writeJSON(w, http.StatusOK, outcome{Redirect: Prefix + "/signin", Notice: msg, Sig: c.flash.sign(bind, "ok", msg, "")})
					return
				}
				http.Redirect(w, r, c.flash.notice(Prefix+"/signin", bind, msg), http.StatusSeeOther)
				return
			}
		}
		act(w, r)
	}
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	if err := c.deps.Accounts.ConsoleSignOut(r.Context(), q.sess.ID); err != nil {
		return outcome{}, err
	}
	c.setCookie(w, sessionCookie, "", -1)
	// The notice shows on the sign-in page, to the browser's pre-sign-in token.
	return outcome{Redirect: Prefix + "/signin", Notice: "Signed out.", bind: c.anonCSRF(w, r)}, nil
}
