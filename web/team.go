package web

import (
	"net/http"
	"strings"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/bidi"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

func (c *Console) teamRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"/team", c.page(member, c.teamPage))
	mux.HandleFunc("POST "+Prefix+"/team/invite", c.action(admin, Prefix+"/team", c.invite))
	mux.HandleFunc("POST "+Prefix+"/team/{id}/role", c.actionAt(admin, userBack, c.setRole))
	mux.HandleFunc("POST "+Prefix+"/team/{id}/remove", c.action(admin, Prefix+"/team", c.removeUser))
}

// inviteForm names the invitation form among the page's forms whose
// fields repeat (each user's role and the invitation's): errAt of its
// errors.
const inviteForm = "invite"

type teamData struct {
	Users []store.User
	// ErrUser is the form a plain post's error came back to: a user's id
	// (userBack), or inviteForm.
	ErrUser string
	// names are the users' names by id, for Inviter.
	names map[uint64]string
}

// inviter is the "Invited by" of a user on the team page.
type inviter struct {
	ID uint64
	// Name is the inviter's, "" when the inviter is no longer a user of
	// the company: its id stays on the invitee (store.User's InvitedBy),
	// and the page says a removed user's.
	Name string
}

// Inviter is who invited u, nil when no user did (a signup, the API key,
// a user stored before invitations named their inviter).
func (d teamData) Inviter(u store.User) *inviter {
	if u.InvitedBy == 0 {
		return nil
	}
	return &inviter{ID: u.InvitedBy, Name: d.names[u.InvitedBy]}
}

// SignupOwnerUnverified says whether u is the owner a sign-up made who has
// not verified the address (store.SignupOwnerUnverified): the page marks
// it "unverified", where another user not verified is an invitation not
// accepted yet, "invited".
func (d teamData) SignupOwnerUnverified(u store.User) bool { return store.SignupOwnerUnverified(u) }

// userBack is the page a plain post of a user's role form comes back to
// with its error: the team page, saying whose form it was, so that the
// error shows beside that user's role, not beside the invitation's.
func userBack(r *http.Request) string {
	if id := r.PathValue("id"); id != "" && strings.Trim(id, "0123456789") == "" {
		return withQuery(Prefix+"/team", "user", id)
	}
	return Prefix + "/team"
}

func (c *Console) teamPage(w http.ResponseWriter, r *http.Request, q *req) error {
	users, err := c.deps.Accounts.Users(r.Context(), q.p())
	if err != nil {
		return err
	}
	data := teamData{Users: users, ErrUser: query(r).Get("user"), names: make(map[uint64]string, len(users))}
	for _, u := range users {
		// The first admin of `admin create-company` has no name.
		name := strings.TrimSpace(u.FirstName + " " + u.LastName)
		if name == "" {
			name = u.Email
		}
		data.names[u.ID] = name
	}
	if data.ErrUser == "" {
		data.ErrUser = inviteForm
	}
	c.render(w, r, http.StatusOK, "team", c.viewFor(q, "Team", data))
	return nil
}

func (c *Console) invite(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	f := r.PostFormValue
	u, err := c.deps.Accounts.Invite(r.Context(), q.p(), account.InviteInput{FirstName: f("firstName"), LastName: f("lastName"),
		Email: f("email"), Role: f("role")})
	if err != nil {
		if pe, ok := problem.As(err); ok && pe.Code == problem.Conflict && pe.Field == "" && pe.Message == account.EmailTaken {
			// The address is the company's already: it is what to change,
			// so the message shows beside it (the API names no field).
			return outcome{}, pe.Refield("email")
		}
		return outcome{}, err
	}
	return outcome{Notice: "Invitation sent to " + bidi.Isolate(u.Email) + "."}, nil
}

func (c *Console) setRole(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	id := store.ParseID(r.PathValue("id"))
	role := r.PostFormValue("role")
	if _, err := c.deps.Accounts.UpdateUser(r.Context(), q.p(), id, account.UserPatch{Role: &role}); err != nil {
		if pe, ok := problem.As(err); ok && pe.Code == problem.Conflict && pe.Field == "" {
			// The one conflict of a role's change is the company's last
			// admin demoted: the role chosen is what to change, so the
			// message shows beside it.
			return outcome{}, pe.Refield("role")
		}
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
