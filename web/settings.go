package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/store"
)

func (c *Console) settingsRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"/settings", c.page(member, c.settingsPage))
	mux.HandleFunc("POST "+Prefix+"/settings/company", c.action(admin, Prefix+"/settings", c.saveCompany))
	mux.HandleFunc("POST "+Prefix+"/settings/api-key/rotate", c.action(admin, Prefix+"/settings", c.rotateKey))
	mux.HandleFunc("POST "+Prefix+"/settings/close", c.action(admin, Prefix+"/settings", c.closeCompany))
}

type settingsData struct {
	Company store.Company
	// APIKey is read only for admins: a member's page never holds it.
	APIKey string
	// APIKeyUnreadable says why the key cannot be shown (its stored copy
	// does not open: account.ErrAPIKeyUnreadable); the page still
	// offers its rotation, the one way to a key that can be shown.
	APIKeyUnreadable string
	// MCPURL is where AI agents connect (POST /mcp, docs/mcp.md).
	MCPURL string
	// Email is the e-mail to SMS listener, when it is on.
	Email EmailToSMS
}

func (c *Console) settingsPage(w http.ResponseWriter, r *http.Request, q *req) error {
	co, err := c.deps.Accounts.Company(r.Context(), q.p())
	if err != nil {
		return err
	}
	data := settingsData{Company: co, MCPURL: strings.TrimSuffix(c.cfg.PublicURL, "/") + "/mcp", Email: c.cfg.Email}
	if q.p().IsAdmin() {
		data.APIKey, _, err = c.deps.Accounts.APIKey(r.Context(), q.p())
		// Only the unreadable copy is shown as such: any other failure,
		// another conflict included, is the page's error.
		if errors.Is(err, account.ErrAPIKeyUnreadable) {
			data.APIKeyUnreadable, err = account.ErrAPIKeyUnreadable.Message, nil
		}
		if err != nil {
			return err
		}
	}
	c.render(w, r, http.StatusOK, "settings", c.viewFor(q, "Settings", data))
	return nil
}

func (c *Console) saveCompany(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	var p account.CompanyPatch
	for name, dst := range map[string]**string{"name": &p.Name, "phone": &p.Phone, "address": &p.Address, "city": &p.City, "state": &p.State, "country": &p.Country, "region": &p.Region} {
		if v, ok := r.PostForm[name]; ok && len(v) > 0 {
			s := v[0]
			*dst = &s
		}
	}
	if _, err := c.deps.Accounts.UpdateCompany(r.Context(), q.p(), p); err != nil {
		return outcome{}, err
	}
	return outcome{Notice: "Company saved."}, nil
}

func (c *Console) rotateKey(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	if _, _, err := c.deps.Accounts.RotateAPIKey(r.Context(), q.p()); err != nil {
		return outcome{}, err
	}
	return outcome{Notice: "API key rotated: the old key stopped working."}, nil
}

// closeCompany closes the company as DELETE /company does
// (account.Service.CloseCompany): confirm names it exactly. Every
// credential of the company is gone before the answer, this session
// included, and the phones linked to its devices are told their device is
// gone (4503); the browser goes to the sign-in page with the notice.
func (c *Console) closeCompany(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	co, err := c.deps.Accounts.CloseCompany(r.Context(), q.p(), r.PostForm.Get("confirm"), c.deps.Phones)
	if err != nil {
		return outcome{}, err
	}
	c.setCookie(w, sessionCookie, "", -1)
	return outcome{Redirect: Prefix + "/signin", Notice: co.Name + " is closed: its users, devices and messages are being deleted.", bind: c.anonCSRF(w, r)}, nil
}
