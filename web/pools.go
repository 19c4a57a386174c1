package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/simrelay/simrelay/internal/bidi"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// Sender pools and per-SIM caps (docs/routing.md): the same services and
// rules as /pools and /device/{fp}/caps; deleting a pool is an admin's.
func (c *Console) poolRoutes(mux *http.ServeMux) {
	base := Prefix + "/pools"
	mux.HandleFunc("GET "+base, c.page(member, c.poolsPage))
	mux.HandleFunc("POST "+base, c.action(member, base, c.createPool))
	mux.HandleFunc("POST "+base+"/caps", c.action(member, base, c.setCaps))
	mux.HandleFunc("POST "+base+"/{id}", c.actionAt(member, poolBack, c.updatePool))
	mux.HandleFunc("POST "+base+"/{id}/delete", c.action(admin, base, c.deletePool))
	mux.HandleFunc("POST "+base+"/{id}/members", c.actionAt(member, poolBack, c.addPoolMember))
	mux.HandleFunc("POST "+base+"/{id}/members/{mid}/remove", c.action(member, base, c.removePoolMember))
}

// simUse is one SIM's caps and use, as the page shows it.
type simUse struct {
	Device string
	store.SIMUsage
}

// newPool names the form that defines a pool among the page's forms whose
// fields repeat (each pool's own): errAt of its errors.
const newPool = "new"

// poolBack is the page a plain post of one pool's forms comes back to with
// its error: the pools page, saying which pool's form it was, so that the
// error shows beside that pool's field, not beside the new pool's.
func poolBack(r *http.Request) string {
	if id := r.PathValue("id"); id != "" && strings.Trim(id, "0123456789") == "" {
		return withQuery(Prefix+"/pools", "pool", id)
	}
	return Prefix + "/pools"
}

type poolsData struct {
	// ErrPool is the form a plain post's error came back to: a pool's id
	// (poolBack), or newPool.
	ErrPool string
	Pools   []store.Pool
	Devices []deviceRow
	// Use is each member's SIM caps and use, by "fingerprint/slot".
	Use map[string]store.SIMUsage
	// SIMs lists the caps and use of every device's SIMs, for the caps form.
	SIMs []simUse
	// Names are the devices' names by fingerprint, read with Devices: the
	// page names a member by its device's name, the fingerprint beside it.
	Names map[string]string
}

// Name is the name of the device with the fingerprint, or the fingerprint
// of one the page did not read (a member's device deleted since).
func (d poolsData) Name(fp string) string {
	if n := d.Names[fp]; n != "" {
		return n
	}
	return fp
}

func (c *Console) poolsPage(w http.ResponseWriter, r *http.Request, q *req) error {
	cid := q.p().CompanyID
	pools, err := c.deps.SMS.Pools(r.Context(), cid)
	if err != nil {
		return err
	}
	devs, err := c.deviceRows(r, cid, false) // no queue depths shown
	if err != nil {
		return err
	}
	data := poolsData{Pools: pools, Devices: devs, Use: map[string]store.SIMUsage{}, Names: make(map[string]string, len(devs)), ErrPool: query(r).Get("pool")}
	if data.ErrPool == "" {
		data.ErrPool = newPool
	}
	for _, d := range devs {
		data.Names[d.Fingerprint] = d.Name
		us, err := c.deps.SMS.SIMCaps(r.Context(), cid, d.Fingerprint)
		if err != nil {
			return err
		}
		for _, u := range us {
			data.Use[d.Fingerprint+"/"+u.Slot] = u
			data.SIMs = append(data.SIMs, simUse{Device: d.Fingerprint, SIMUsage: u})
		}
	}
	c.render(w, r, http.StatusOK, "pools", c.viewFor(q, "Pools", data))
	return nil
}

// poolForm reads the fields of a pool form that were sent.
func poolForm(r *http.Request) (sms.PoolInput, error) {
	var in sms.PoolInput
	for name, dst := range map[string]**string{"name": &in.Name, "strategy": &in.Strategy, "fallback": &in.Fallback} {
		if v, ok := r.PostForm[name]; ok && len(v) > 0 {
			s := v[0]
			*dst = &s
		}
	}
	if in.Strategy != nil && *in.Strategy != store.PoolSticky {
		in.Fallback = nil // the form sends its fallback select whatever the strategy
	}
	if v := r.PostFormValue("failover_after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return in, problem.Invalid("failover_after", "must be a whole number of seconds")
		}
		in.FailoverAfter = &n
	}
	if v, ok := r.PostForm["members"]; ok {
		ms := make([]sms.PoolMemberInput, 0, len(v))
		for _, m := range v {
			fp, slot, _ := strings.Cut(m, "/")
			ms = append(ms, sms.PoolMemberInput{Device: fp, SIMSlot: slot})
		}
		in.Members = &ms
	}
	return in, nil
}

func (c *Console) createPool(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	in, err := poolForm(r)
	if err != nil {
		return outcome{}, err
	}
	if in.Members == nil {
		in.Members = &[]sms.PoolMemberInput{} // no box ticked: "members must hold 1 to 200"
	}
	p, err := c.deps.SMS.CreatePool(r.Context(), q.p().CompanyID, in)
	if err != nil {
		return outcome{}, err
	}
	return outcome{Notice: "Pool " + bidi.Isolate(p.Name) + " is defined: sends may name it in pool."}, nil
}

func (c *Console) updatePool(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	id := store.ParseID(r.PathValue("id"))
	in, err := poolForm(r)
	if err != nil {
		return outcome{}, err
	}
	p, err := c.deps.SMS.UpdatePool(r.Context(), q.p().CompanyID, id, in)
	if err != nil {
		return outcome{}, err
	}
	return outcome{Notice: "Pool " + bidi.Isolate(p.Name) + " is saved."}, nil
}

func (c *Console) deletePool(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	id := store.ParseID(r.PathValue("id"))
	p, err := c.deps.SMS.DeletePool(r.Context(), q.p().CompanyID, id)
	if err != nil {
		return outcome{}, err
	}
	return outcome{Notice: "Pool " + bidi.Isolate(p.Name) + " is deleted."}, nil
}

func (c *Console) addPoolMember(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	id := store.ParseID(r.PathValue("id"))
	fp, slot, _ := strings.Cut(r.PostFormValue("member"), "/")
	_, m, err := c.deps.SMS.AddPoolMember(r.Context(), q.p().CompanyID, id, sms.PoolMemberInput{Device: fp, SIMSlot: slot})
	if err != nil {
		return outcome{}, err
	}
	return outcome{Notice: m.Device + " " + m.SIMSlot + " is a member now."}, nil
}

func (c *Console) removePoolMember(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	id := store.ParseID(r.PathValue("id"))
	mid := store.ParseID(r.PathValue("mid"))
	if _, err := c.deps.SMS.RemovePoolMember(r.Context(), q.p().CompanyID, id, mid); err != nil {
		return outcome{}, err
	}
	return outcome{Notice: "The member is out of the pool."}, nil
}

// setCaps sets one SIM's caps; a blank field is no cap.
func (c *Console) setCaps(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	fp, slot, _ := strings.Cut(r.PostFormValue("sim"), "/")
	in := sms.SIMCapsInput{Slot: slot}
	// In the form's order: of two fields that are not numbers, the first is named.
	for _, f := range []struct {
		name string
		dst  **int64
	}{{"per_day", &in.PerDay}, {"per_month", &in.PerMonth}, {"recipients_per_day", &in.RecipientsPerDay}} {
		v := strings.TrimSpace(r.PostFormValue(f.name))
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return outcome{}, problem.Invalid(f.name, "must be a whole number, or blank for no cap")
		}
		*f.dst = &n
	}
	if _, err := c.deps.SMS.SetSIMCaps(r.Context(), q.p().CompanyID, fp, []sms.SIMCapsInput{in}); err != nil {
		if pe, ok := problem.As(err); ok && strings.HasPrefix(pe.Field, "sims[0].") {
			// The form has one SIM: its fields go by their own names.
			return outcome{}, pe.Refield(strings.TrimPrefix(pe.Field, "sims[0]."))
		}
		return outcome{}, err
	}
	return outcome{Notice: "The caps of " + fp + " " + slot + " are saved."}, nil
}
