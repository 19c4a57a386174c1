package account_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/testclock"
)

// The verification and reset mails promise the lifetimes the server gives
// their tokens (Config.VerifyTTL, Config.ResetTTL), not the defaults.
func TestMailsSayConfiguredLifetimes(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	s := newService(t, st, account.Config{VerifyTTL: 72 * time.Hour, ResetTTL: 30 * time.Minute}, clk.Now)
	const email = "owner@acme.test"
	_, _, err := s.Signup(context.Background(), account.SignupInput{
		Company: account.CompanyInput{Name: "Acme", Phone: "+15551234567", Address: "1 Main St", City: "Springfield", State: "IL", Country: "US"},
		Owner:   account.OwnerInput{FirstName: "Ann", LastName: "Lee", Email: email, Password: "Correct horse battery 9"},
	})
	if err != nil {
		t.Fatalf("Signup: %v", err)
	}
	if err := s.ForgotPassword(context.Background(), email); err != nil {
		t.Fatalf("ForgotPassword: %v", err)
	}
	mails, err := st.Mails(false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"/verify-email?token=": "expires in 3 days", "/reset-password?token=": "expires in 30 minutes"}
	for path, phrase := range want {
		found := false
		for _, m := range mails {
			if m.To != email || !strings.Contains(m.Text, path) {
				continue
			}
			found = true
			if !strings.Contains(m.Text, phrase) || !strings.Contains(m.HTML, phrase) {
				t.Errorf("the %s mail does not say %q:\n%s", path, phrase, m.Text)
			}
		}
		if !found {
			t.Errorf("no %s mail to %s among %d mails", path, email, len(mails))
		}
	}
}
