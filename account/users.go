package account

import (
	"context"
	"strings"

	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// UserPatch changes a user; nil fields stay as they are.
type UserPatch struct {
	FirstName, LastName, Phone, Role *string
}

// InviteInput is a new member.
type InviteInput struct {
	FirstName, LastName, Email, Phone, Role string
}

// Me returns the caller's own profile; API-key callers have none.
func (s *Service) Me(_ context.Context, p Principal) (store.User, error) {
	if p.ViaAPIKey {
		return store.User{}, problem.New(problem.UserTokenRequired, "This route needs a user's access token from login; an API key has no user profile.")
	}
	u, err := s.store.User(p.UserID)
	return u, mapStoreErr(err, "user")
}

// UpdateMe changes the caller's name and phone; the role is not theirs to change here.
func (s *Service) UpdateMe(ctx context.Context, p Principal, patch UserPatch) (store.User, error) {
	me, err := s.Me(ctx, p)
	if err != nil {
		return store.User{}, err
	}
	patch.Role = nil
	return s.updateUser(p, me, patch)
}

// Users lists the company's users, oldest first.
func (s *Service) Users(_ context.Context, p Principal) ([]store.User, error) {
	return s.store.CompanyUsers(p.CompanyID)
}

// companyUser loads a user of the caller's company; another company's user is NotFound.
func (s *Service) companyUser(p Principal, id uint64) (store.User, error) {
	u, err := s.store.User(id)
	if err == nil && u.CompanyID != p.CompanyID {
		err = store.ErrNotFound
	}
	return u, mapStoreErr(err, "user")
}

// Invite adds a member without a password and mails a link to set one.
func (s *Service) Invite(ctx context.Context, p Principal, in InviteInput) (store.User, error) {
	region, err := s.region(p.CompanyID)
	if err != nil {
		return store.User{}, err
	}
	var v check
	u := store.User{
		CompanyID: p.CompanyID,
		FirstName: v.required("firstName", in.FirstName, maxNameLen),
		LastName:  v.required("lastName", in.LastName, maxNameLen),
		Email:     v.email("email", in.Email),
		Phone:     v.phone("phone", in.Phone, false, region),
		Role:      v.role("role", in.Role),
	}
	if v.err != nil {
		return u, v.err
	}
	c, err := s.store.Company(p.CompanyID)
	if err != nil {
		return u, mapStoreErr(err, "company")
	}
	// The API key acts for the company, not for a person: its invitation
	// names no inviter ("You have been invited to join Acme"), where naming
	// the company as one read "Acme invited you to join Acme".
	inviter := ""
	if !p.ViaAPIKey {
		// The invitation remembers who sent it, for good (store.User's
		// InvitedBy): the company reviews an admin's invitees when it
		// removes that admin (docs/security.md, "Rotating secrets").
		u.InvitedBy = p.UserID
		if me, err := s.store.User(p.UserID); err == nil {
			inviter = strings.TrimSpace(me.FirstName + " " + me.LastName)
		}
	}
	refund, err := s.takeInvite(p.CompanyID)
	if err != nil {
		return u, err
	}
	u.CreatedAt = s.now().UTC()
	held, err := s.store.InviteUser(&u, u.CreatedAt)
	if err != nil {
		refund() // nothing stored, no mail
		return u, mapStoreErr(err, "company")
	}
	// An address that already has an account (in another company: the store
	// refused one of this company's) cannot join a second company. Its owner
	// is told so by mail; the inviting company gets the answer any invitation
	// gets, and the same work is done either way (a token is stored, a mail
	// queued, the address looked up), so neither the answer nor its timing
	// says the address exists. An account of a company being closed finds
	// no user (addressClosing): its address is free within minutes, so the
	// invitation is the usual one, whose link works once it is (until then
	// it answers 409 saying so, ResetPassword).
	if s.addressClosing(u.Email) {
		held = false
	}
	err = s.sendToken(ctx, u, tokenInvite, s.cfg.InviteTTL, func(tok string) mail.Message {
		if held {
			return mail.InviteAddressTaken(u.FirstName, c.Name, inviter)
		}
		return mail.Invite(s.cfg.PublicURL, u.FirstName, c.Name, inviter, tok, s.cfg.InviteTTL)
	})
	return u, err
}

// UpdateUser changes a user of the caller's company.
func (s *Service) UpdateUser(_ context.Context, p Principal, id uint64, patch UserPatch) (store.User, error) {
	stored, err := s.companyUser(p, id)
	if err != nil {
		return store.User{}, err
	}
	return s.updateUser(p, stored, patch)
}

// updateUser changes stored, a user of p's company as its caller read it;
// a phone is read in the company's region.
func (s *Service) updateUser(p Principal, stored store.User, patch UserPatch) (store.User, error) {
	region, err := s.region(p.CompanyID)
	if err != nil {
		return store.User{}, err
	}
	var v check
	patch = UserPatch{
		FirstName: v.patch(keptAsStored(patch.FirstName, stored.FirstName), func(s string) string { return v.required("firstName", s, maxNameLen) }),
		LastName:  v.patch(keptAsStored(patch.LastName, stored.LastName), func(s string) string { return v.required("lastName", s, maxNameLen) }),
		Phone:     v.patch(patch.Phone, func(s string) string { return v.phone("phone", s, false, region) }),
		Role:      v.patch(patch.Role, func(s string) string { return v.role("role", s) }),
	}
	if v.err != nil {
		return store.User{}, v.err
	}
	u, err := s.store.UpdateUser(stored.ID, func(u *store.User) error {
		setIf(&u.FirstName, patch.FirstName)
		setIf(&u.LastName, patch.LastName)
		setIf(&u.Phone, patch.Phone)
		setIf(&u.Role, patch.Role)
		return nil
	})
	return u, mapStoreErr(err, "user")
}

// DeleteUser removes a user of the caller's company and signs out their sessions.
func (s *Service) DeleteUser(_ context.Context, p Principal, id uint64) error {
	if _, err := s.companyUser(p, id); err != nil {
		return err
	}
	return mapStoreErr(s.store.DeleteUser(id), "user")
}

// setIf copies a patch value when it is present.
func setIf(dst, src *string) {
	if src != nil {
		*dst = *src
	}
}
