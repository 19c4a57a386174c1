package web

import (
	"net/http"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/bidi"
	"github.com/simrelay/simrelay/store"
)

func (c *Console) teamRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"/team", c.page(member, c.teamPage))
	mux.HandleFunc("POST "+Prefix+"/team/invite", c.action(admin, Prefix+"/team", c.invite))
	mux.HandleFunc("POST "+Prefix+"/team/{id}/role", c.action(admin, Prefix+"/team", c.setRole))
	mux.HandleFunc("POST "+Prefix+"/team/{id}/remove", c.action(admin, Prefix+"/team", c.removeUser))
}

func (c *Console) teamPage(w http.ResponseWriter, r *http.Request, q *req) error {
	users, err := c.deps.Accounts.Users(r.Context(), q.p())
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "team", c.viewFor(q, "Team", users))
	return nil
}

func (c *Console) invite(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	f := r.PostFormValue
	u, err := c.deps.Accounts.Invite(r.Context(), q.p(), account.InviteInput{FirstName: f("firstName"), LastName: f("lastName"),
		Email: f("email"), Role: f("role")})
	if err != nil {
		return outcome{}, err
	}
	return outcome{Notice: "Invitation sent to " + bidi.Isolate(u.Email) + "."}, nil
}

func (c *Console) setRole(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	id := store.ParseID(r.PathValue("id"))
	role := r.PostFormValue("role")
	if _, err := c.deps.Accounts.UpdateUser(r.Context(), q.p(), id, account.UserPatch{Role: &role}); err != nil {
		return outcome{}, err
	}
	return outcome{Notice: "Role changed."}, nil
}

func (c *Console) removeUser(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	id := store.ParseID(r.PathValue("id"))
	if err := c.deps.Accounts.DeleteUser(r.Context(), q.p(), id); err != nil {
		return outcome{}, err
	}
	return outcome{Notice: "User removed."}, nil
}

// roles are the choices of the role selects.
var roles = []string{store.RoleAdmin, store.RoleMember}
