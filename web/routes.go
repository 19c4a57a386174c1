package web

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"

	"github.com/simrelay/simrelay/internal/nulchar"
	"github.com/simrelay/simrelay/problem"
)

// navItem is one entry of the console's navigation.
type navItem struct {
	Path, Label string
	Current     bool
}

// section is a page of the signed-in console: its place in the navigation
// and its routes. The navigation is built from this list alone, so a page
// joins (or leaves, e.g. billing when it is off) in one place and no link
// ever points at a page that is not served.
type section struct {
	path, label string
	on          bool
	routes      func(mux *http.ServeMux)
}

func (c *Console) sections() []section {
	return []section{
		{Prefix + "/", "Overview", true, c.overviewRoutes},
		{Prefix + "/devices", "Devices", true, c.deviceRoutes},
		{Prefix + "/messages", "Messages", true, c.messageRoutes},
		{Prefix + "/pools", "Pools", true, c.poolRoutes},
		{Prefix + "/numbers", numbersTitle, c.deps.Channels != nil, c.numberRoutes},
		{Prefix + "/opt-outs", "Opt-outs", true, c.optOutRoutes},
		{Prefix + "/webhooks", "Webhooks", true, c.webhookRoutes},
		{Prefix + "/team", "Team", true, c.teamRoutes},
		{Prefix + "/settings", "Settings", true, c.settingsRoutes},
		{Prefix + "/billing", "Billing", c.deps.Billing != nil, c.billingRoutes},
	}
}

func (c *Console) routes() {
	mux := c.mux
	toConsole := func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, Prefix+"/", http.StatusFound) }
	mux.HandleFunc("GET /{$}", toConsole)
	mux.HandleFunc("GET "+Prefix, toConsole)
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix(Prefix+"/static/", http.FileServerFS(static))
	mux.Handle("GET "+Prefix+"/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	}))
	// Browsers ask for /favicon.ico on every site, pages or not.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/x-icon")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeFileFS(w, r, staticFS, "static/favicon.ico")
	})
	c.authRoutes(mux)
	if c.deps.Media != nil {
		c.mediaRoutes(mux)
	}
	for _, s := range c.sections() {
		if s.on {
			s.routes(mux)
		}
	}
	mux.HandleFunc("GET "+Prefix+"/events", c.events)
	// Anything else under the prefix is the console's own 404 page (the
	// error body to the script, refuse).
	mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		c.refuse(w, r, problem.New(problem.NotFound, "There is no such page."))
	})
}

// refuseUnstorable answers a request whose path or query holds U+0000
// (%00) or bytes that are not UTF-8 (%FF) with the console's own error
// page, as the API's refuseUnstorable (httpapi) answers its routes (which
// leaves the console's paths to this): no page, fingerprint, number or
// token holds either, and PostgreSQL (the store of a cluster) cannot even
// compare a text with it, so a page that looked it up would fail with a
// 500. A path is no page (404); a query parameter is the person's 400,
// naming it. So is a parameter given twice with different values, as the
// API refuses it (refuseRepeated): a page reads one value of each, and
// the console's own links and forms never repeat one, so such an address
// was edited by hand, and taking its first value would show the person
// something other than what they asked for without a word. The same value
// given twice means one thing and is taken. A pair the parser would drop
// (a bad % escape, a ;: nulchar.Malformed), read as absent before, is
// refused first, before a NUL in another, as the API does. The console's
// script, asking for JSON, gets the API's body.
//
// The query is parsed here once, only when there is one, and kept as the
// request's Form for the pages to read (query): a request without a form
// body (GET) has no other form values, so that is what ParseForm would
// leave there. A form post's Form is left to its ParseForm (action), which
// adds the body's fields.
func (c *Console) refuseUnstorable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := nulchar.Path(r.URL.Path)
		var q url.Values
		var pe *problem.Error
		if !ok && r.URL.RawQuery != "" {
			// A pair the parser drops is named first, as the API does:
			// the parse below would not show it.
			if name, bad := nulchar.Malformed(r.URL.RawQuery); bad {
				c.refuse(w, r, problem.Invalid(name, fmt.Sprintf("The address's parameter %q is not well formed: a %% must be followed by two hex digits, and ; separates no parameters.", name)))
				return
			}
			q = r.URL.Query()
			f, ok = nulchar.Values(q)
		}
		switch {
		case !ok:
			if name, repeated := nulchar.Repeated(q, nil); repeated {
				pe = problem.Invalid(name, fmt.Sprintf("The address gives the parameter %q more than once, with different values; give it once.", name))
				break
			}
			if q != nil && !formBody(r.Method) {
				r.Form = q
			}
			next.ServeHTTP(w, r)
			return
		case f.Part == nulchar.InParam && f.Cause == nulchar.NUL:
			pe = problem.Invalid(f.Param, fmt.Sprintf("The address's parameter %q holds the NUL character (%%00), which no page takes.", f.Param))
		case f.Part == nulchar.InParam:
			pe = problem.Invalid(f.Param, fmt.Sprintf("The address's parameter %q is not UTF-8 text, which no page takes.", f.Param))
		default:
			pe = problem.New(problem.NotFound, "There is no such page.")
		}
		c.refuse(w, r, pe)
	})
}

// refuse answers a request the console reads nothing of: its own error
// page (Not found for a 404), or, to the console's script asking for JSON,
// the API's body. It renders nothing of a session, which it has not read.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, pe *problem.Error) {
	if wantsJSON(r) {
		writeJSON(w, pe.Status(), pe)
		return
	}
	v := view{Title: "Error", Flash: Flash{Message: pe.Message}}
	if pe.Code == problem.NotFound {
		v.Title = "Not found"
	}
	c.render(w, r, pe.Status(), "error", v)
}

// formBody says whether ParseForm reads a request of this method's body.
func formBody(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}

// query is the request's query, parsed once by refuseUnstorable, which
// keeps it as the request's Form; a request without one has none (a Get
// of nil is ""). A form post, whose Form holds its body's fields too, and
// a request that did not pass the check parse the address themselves.
func query(r *http.Request) url.Values {
	switch {
	case r.URL.RawQuery == "":
		return nil
	case r.Form != nil && !formBody(r.Method):
		return r.Form
	}
	return r.URL.Query()
}

// viewFor starts the view of a signed-in page.
func (c *Console) viewFor(q *req, title string, data any) view {
	v := view{Title: title, User: q.user, Admin: q.p().IsAdmin(), CSRF: q.sess.CSRF, Data: data}
	for _, s := range c.sections() {
		if s.on {
			v.Nav = append(v.Nav, navItem{Path: s.path, Label: s.label, Current: s.label == title})
		}
	}
	if co, err := c.deps.Accounts.Company(context.Background(), q.p()); err == nil {
		v.Company = co.Name
	}
	return v
}
