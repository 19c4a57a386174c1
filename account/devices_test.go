package account_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/problem"
)

// A device cookie is stateless, keyed by the store's secret: a server
// started again on the store (or another node of a cluster on it) takes
// the cookies an earlier one issued, and after a rotation of the secret
// (admin rotate-keys) none of them: the owner's login with one is
// throttled as any untrusted client's, until a login issues a fresh one.
func TestDeviceCookiesOutliveRestartsNotRotations(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	start := func() *account.Service {
		t.Helper()
		s, err := account.New(account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}, st, nil,
			slog.New(slog.DiscardHandler), clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const email, password = "ana@acme.test", "Correct-Horse-9"
	first := start()
	if _, _, _, err := first.CreateCompany("Acme", account.OwnerInput{FirstName: "Ana", LastName: "Admin", Email: email, Password: password}); err != nil {
		t.Fatal(err)
	}
	login := func(s *account.Service, client int, cookie, pw string) (account.Session, error) {
		ctx := account.WithDevice(account.WithClient(context.Background(), fmt.Sprintf("2001:db8:%x::1", client)), cookie)
		return s.Login(ctx, email, pw)
	}
	// spend has 4 clients spend the address's failed logins on s.
	spend := func(s *account.Service) {
		t.Helper()
		for i := range account.DefaultLoginRate.Limit {
			if _, err := login(s, 10+i/account.ClientShare, "", "Wrong-Horse-9"); !problem.Is(err, problem.InvalidLogin) {
				t.Fatalf("failure %d: %v, want invalid_credentials", i+1, err)
			}
		}
		if _, err := login(s, 1, "", password); !problem.Is(err, problem.RateLimited) {
			t.Fatalf("the owner without a cookie over the address's failures: %v, want rate_limited", err)
		}
	}
	sess, err := login(first, 1, "", password)
	if err != nil || sess.Device == "" {
		t.Fatalf("login: %v, device cookie %q", err, sess.Device)
	}

	again := start()
	spend(again)
	if _, err := login(again, 1, sess.Device, password); err != nil {
		t.Fatalf("the owner with the cookie of the server before: %v, want signed in", err)
	}

	replaced, _, err := st.RotateSecrets([]string{account.DeviceSecret}, account.ResealAPIKey)
	if err != nil || len(replaced) != 1 {
		t.Fatalf("rotate: %v %v", replaced, err)
	}
	rotated := start()
	spend(rotated)
	if _, err := login(rotated, 1, sess.Device, password); !problem.Is(err, problem.RateLimited) {
		t.Fatalf("the owner with a cookie of before the rotation: %v, want rate_limited", err)
	}
	clk.Advance(account.DefaultLoginRate.Window)
	fresh, err := login(rotated, 1, "", password)
	if err != nil {
		t.Fatal(err)
	}
	spend(rotated)
	if _, err := login(rotated, 1, fresh.Device, password); err != nil {
		t.Fatalf("the owner with a cookie issued after the rotation: %v, want signed in", err)
	}
}
