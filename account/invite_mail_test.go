package account_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/store"
)

// An invitation made with the API key, which acts for the company and not
// for a person, names no inviter: its mail read "Acme invited you to Acme
// on simrelay" and "Acme invited you to join Acme". One made by an admin
// still names the admin.
func TestInviteMailNamesAPersonOrNoInviter(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	svc := newService(t, st, account.Config{}, clk.Now)
	owner := account.OwnerInput{FirstName: "Ana", LastName: "Lima", Email: "ana@acme.test", Password: "Correct horse battery 9"}
	acme, ana, _, err := svc.CreateCompany("Acme", owner)
	if err != nil {
		t.Fatal(err)
	}
	mailTo := func(to string) store.Mail {
		t.Helper()
		mails, err := st.Mails(true)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mails {
			if m.To == to {
				return m
			}
		}
		t.Fatalf("no mail to %s among %d", to, len(mails))
		return store.Mail{}
	}
	ctx := context.Background()
	for _, c := range []struct {
		p                    account.Principal
		email, subject, line string
	}{
		{account.Principal{CompanyID: acme.ID, Role: store.RoleAdmin, ViaAPIKey: true}, "bo@acme.test",
			"You are invited to Acme on simrelay", "You have been invited to join Acme on simrelay."},
		{account.Principal{CompanyID: acme.ID, UserID: ana.ID, Role: store.RoleAdmin}, "cy@acme.test",
			"Ana Lima invited you to Acme on simrelay", "Ana Lima invited you to join Acme on simrelay."},
	} {
		if _, err := svc.Invite(ctx, c.p, account.InviteInput{FirstName: "Bo", LastName: "Ng", Email: c.email, Role: store.RoleMember}); err != nil {
			t.Fatal(err)
		}
		m := mailTo(c.email)
		if m.Subject != c.subject {
			t.Errorf("%s: subject %q, want %q", c.email, m.Subject, c.subject)
		}
		if !strings.Contains(m.Text, c.line) {
			t.Errorf("%s: the text lacks %q:\n%s", c.email, c.line, m.Text)
		}
	}
}
