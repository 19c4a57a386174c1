package account_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// The address of a user whose company is closing (marked, its removal's
// first step not run yet, or failed and waiting for its next try) finds no
// account: a login is refused as for an unknown address. It is free once
// the removal took it, and until then each way to take it says so, none
// that it has an account to sign in with: a sign-up is 409 saying the
// address is being freed, an invitation of it by another company mails
// the usual link (not "this address already has an account"), and that
// link followed before the removal is 409 saying to follow it again
// later, the link kept; followed after, it sets the password. The sign-up
// answered "A user with this e-mail address already exists", the
// invitation told its owner to sign in with the account, and the link
// said the same.
func TestAddressOfAClosingCompany(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	svc := newService(t, st, account.Config{}, time.Now)
	const password = "Correct horse battery 9"
	acme, _, _, err := svc.CreateCompany("Acme", account.OwnerInput{FirstName: "Ana", LastName: "Lima", Email: "ana@acme.test", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	beta, _, _, err := svc.CreateCompany("Beta", account.OwnerInput{FirstName: "Bo", LastName: "Ng", Email: "bo@beta.test", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkCompanyClosing(acme.ID, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	closingConflict := func(what string, err error) {
		t.Helper()
		pe, ok := problem.As(err)
		if !ok || pe.Code != problem.Conflict || !strings.Contains(pe.Message, "being closed") || strings.Contains(pe.Message, "Sign in") {
			t.Errorf("%s while the address's company closes: %v, want 409 conflict saying the address is being freed", what, err)
		}
	}
	if _, err := svc.Login(ctx, "ana@acme.test", password); !problem.Is(err, problem.InvalidLogin) {
		t.Errorf("a login while the company closes: %v, want invalid_credentials", err)
	}
	signup := account.SignupInput{Company: account.CompanyInput{Name: "Acme again", Phone: "+15551230000"},
		Owner: account.OwnerInput{FirstName: "Ana", LastName: "Lima", Email: "ANA@acme.test", Password: password}}
	_, _, err = svc.Signup(ctx, signup)
	closingConflict("a sign-up", err)

	inv, err := svc.Invite(ctx, account.Principal{CompanyID: beta.ID, Role: store.RoleAdmin, ViaAPIKey: true},
		account.InviteInput{FirstName: "Ana", LastName: "Lima", Email: "ana@acme.test", Role: store.RoleMember})
	if err != nil {
		t.Fatal(err)
	}
	mails, err := st.Mails(true)
	if err != nil {
		t.Fatal(err)
	}
	token := ""
	for _, m := range mails {
		if m.To == inv.Email {
			if strings.Contains(m.Text, "already has a simrelay account") {
				t.Errorf("the invitation of an address whose company closes says it has an account:\n%s", m.Text)
			}
			if tok := regexp.MustCompile(`reset-password\?token=([A-Za-z0-9_-]+)`).FindStringSubmatch(m.Text); tok != nil {
				token = tok[1]
			}
		}
	}
	if token == "" {
		t.Fatalf("no invitation link mailed to %s; the mails: %+v", inv.Email, mails)
	}
	closingConflict("the invitation's link", svc.ResetPassword(ctx, token, password))

	conformance.RemoveCompany(t, st, acme.ID, 1000)
	if err := svc.ResetPassword(ctx, token, password); err != nil {
		t.Fatalf("the invitation's link once the company is removed: %v", err)
	}
	if s, err := svc.Login(ctx, "ana@acme.test", password); err != nil || s.User.CompanyID != beta.ID {
		t.Errorf("a login of the invitee: %+v (%v), want a session in Beta", s.User, err)
	}
}
