package web

import (
	"net/http"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/bidi"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// The opt-out list: members list, add and remove numbers, as on the API
// (/opt-outs is not admin-only); switching the STOP/START keywords is a
// change of the company (PATCH /company), so it is an admin's.
func (c *Console) optOutRoutes(mux *http.ServeMux) {
	base := Prefix + "/opt-outs"
	mux.HandleFunc("GET "+base, c.page(member, c.optOutsPage))
	mux.HandleFunc("POST "+base, c.action(member, base, c.addOptOut))
	mux.HandleFunc("POST "+base+"/remove", c.action(member, base, c.removeOptOut))
	mux.HandleFunc("POST "+base+"/keywords", c.action(admin, base, c.setOptOutKeywords))
}

type optOutsData struct {
	List []store.OptOut
	// More says the list goes on past the page's end.
	More     bool
	Keywords bool
}

func (c *Console) optOutsPage(w http.ResponseWriter, r *http.Request, q *req) error {
	co, err := c.deps.Accounts.Company(r.Context(), q.p())
	if err != nil {
		return err
	}
	list, err := c.deps.SMS.OptOuts(r.Context(), q.p().CompanyID, query(r).Get("after"), sms.MaxOptOutPage)
	if err != nil {
		return err
	}
	data := optOutsData{List: list, More: len(list) == sms.MaxOptOutPage, Keywords: co.OptOutKeywords == nil || *co.OptOutKeywords}
	c.render(w, r, http.StatusOK, "optouts", c.viewFor(q, "Opt-outs", data))
	return nil
}

func (c *Console) addOptOut(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	o, created, err := c.deps.SMS.AddOptOut(r.Context(), q.p().CompanyID, r.PostFormValue("phone"))
	if err != nil {
		return outcome{}, err
	}
	if !created {
		return outcome{Notice: bidi.Isolate(numplan.Display(o.Phone)) + " was on the list already."}, nil
	}
	return outcome{Notice: bidi.Isolate(numplan.Display(o.Phone)) + " is on the list: sends to it are refused."}, nil
}

func (c *Console) removeOptOut(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	number := r.PostFormValue("phone")
	if err := c.deps.SMS.RemoveOptOut(r.Context(), q.p().CompanyID, number); err != nil {
		return outcome{}, err
	}
	// As the list shows it: a number in international format; an entry a
	// keyword added is listed as its phone reported the sender, which may
	// be a name (right-to-left, or with a directional control), is removed
	// by that form and shown as it is (Display leaves what is not E.164).
	return outcome{Notice: bidi.Isolate(numplan.Display(number)) + " is off the list."}, nil
}

func (c *Console) setOptOutKeywords(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	var on bool
	switch r.PostFormValue("opt_out_keywords") {
	case "true", "1":
		on = true
	case "false", "0":
	default:
		return outcome{}, problem.Invalid("optOutKeywords", "must be true or false")
	}
	if _, err := c.deps.Accounts.UpdateCompany(r.Context(), q.p(), account.CompanyPatch{OptOutKeywords: &on}); err != nil {
		return outcome{}, err
	}
	if on {
		return outcome{Notice: "STOP and START now change the list."}, nil
	}
	return outcome{Notice: "STOP and START no longer change the list."}, nil
}
