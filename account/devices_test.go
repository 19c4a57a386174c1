package account_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testclock"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
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

	replaced, _, _, err := st.RotateSecrets([]string{account.DeviceSecret}, account.ResealAPIKey)
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

// A device cookie is the trust of one user with one password: a reset of
// the password (the owner's way out of a compromise) voids every cookie
// issued before it, or whoever had the old password could have signed in
// any number of times beforehand and kept a fresh 5 guesses a window per
// cookie at the new password, past the address's count; and the cookie of
// a deleted user exempts nobody who signs up with the address later.
func TestDeviceCookiesEndWithTheirPasswordAndUser(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	s, err := account.New(account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}, st, nil,
		slog.New(slog.DiscardHandler), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	const email, old, fresh, other = "ana@acme.test", "Correct-Horse-9", "Battery-Staple-8", "Other-Person-7"
	c, u, _, err := s.CreateCompany("Acme", account.OwnerInput{FirstName: "Ana", Email: email, Password: old})
	if err != nil {
		t.Fatal(err)
	}
	login := func(client int, cookie, pw string) (account.Session, error) {
		ctx := account.WithDevice(account.WithClient(context.Background(), fmt.Sprintf("2001:db8:%x::1", client)), cookie)
		return s.Login(ctx, email, pw)
	}
	// spend has 4 clients spend the address's failed logins of a new window.
	spend := func() {
		t.Helper()
		clk.Advance(account.DefaultLoginRate.Window)
		for i := range account.DefaultLoginRate.Limit {
			if _, err := login(10+i/account.ClientShare, "", "Wrong-Horse-9"); !problem.Is(err, problem.InvalidLogin) {
				t.Fatalf("failure %d: %v, want invalid_credentials", i+1, err)
			}
		}
	}
	var before []string
	for range 3 {
		sess, err := login(1, "", old)
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, sess.Device)
	}

	const link = "reset-link-token-of-the-owner-0123456789"
	h := sha256.Sum256([]byte(link))
	if err := st.PutOneTimeToken(h[:], store.OneTimeToken{Kind: "reset", UserID: u.ID, ExpiresAt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.ResetPassword(context.Background(), link, fresh); err != nil {
		t.Fatal(err)
	}
	spend()
	for i, c := range before {
		if _, err := login(2, c, "Guess-Number-1"); !problem.Is(err, problem.RateLimited) {
			t.Fatalf("a guess with cookie %d of before the reset: %v, want rate_limited", i+1, err)
		}
		if _, err := login(2, c, fresh); !problem.Is(err, problem.RateLimited) {
			t.Fatalf("the new password with cookie %d of before the reset: %v, want rate_limited", i+1, err)
		}
	}
	clk.Advance(account.DefaultLoginRate.Window)
	after, err := login(1, "", fresh)
	if err != nil {
		t.Fatal(err)
	}
	spend()
	if _, err := login(1, after.Device, fresh); err != nil {
		t.Fatalf("the owner with a cookie of after the reset: %v, want signed in", err)
	}

	// Cy, another admin, signs in and is deleted; a stranger signs up with
	// the address, and Cy's cookie must exempt nobody from its count.
	const cyEmail = "cy@acme.test"
	cy := store.User{CompanyID: c.ID, FirstName: "Cy", Email: cyEmail, Role: u.Role, PasswordHash: u.PasswordHash, EmailVerified: true, CreatedAt: clk.Now()}
	if err := st.CreateUser(&cy); err != nil {
		t.Fatal(err)
	}
	cyLogin := func(client int, cookie, pw string) (account.Session, error) {
		ctx := account.WithDevice(account.WithClient(context.Background(), fmt.Sprintf("2001:db8:%x::1", client)), cookie)
		return s.Login(ctx, cyEmail, pw)
	}
	cySess, err := cyLogin(1, "", old)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteUser(cy.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.CreateCompany("Other", account.OwnerInput{FirstName: "Bo", Email: cyEmail, Password: other}); err != nil {
		t.Fatal(err)
	}
	for i := range account.DefaultLoginRate.Limit {
		if _, err := cyLogin(10+i/account.ClientShare, "", "Wrong-Horse-9"); !problem.Is(err, problem.InvalidLogin) {
			t.Fatalf("failure %d: %v, want invalid_credentials", i+1, err)
		}
	}
	if _, err := cyLogin(1, cySess.Device, "Guess-Number-2"); !problem.Is(err, problem.RateLimited) {
		t.Fatalf("a guess at the address's new account with the deleted user's cookie: %v, want rate_limited", err)
	}
	if _, err := cyLogin(1, cySess.Device, other); !problem.Is(err, problem.RateLimited) {
		t.Fatalf("the new account's password with the deleted user's cookie: %v, want rate_limited", err)
	}
}

// lookups counts the store's reads of users by address.
type lookups struct {
	store.Backend
	byEmail atomic.Int64
}

func (l *lookups) UserByEmail(email string) (store.User, error) {
	l.byEmail.Add(1)
	return l.Backend.UserByEmail(email)
}

// A login whose device cookie is not trusted (signed before a reset or a
// rotation, tampered with, or past its failures) takes the untrusted path
// with the user its cookie's check read: one read of the address's user a
// login, as a login without a cookie has, not a second one for the path.
func TestUntrustedDeviceCookieReadsTheUserOnce(t *testing.T) {
	t.Parallel()
	st := &lookups{Backend: storetest.Open(t)}
	clk := testclock.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	s, err := account.New(account.Config{PublicURL: "http://localhost", PasswordTime: 1, PasswordMemory: 64}, st, nil,
		slog.New(slog.DiscardHandler), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	const email, password = "ana@acme.test", "Correct-Horse-9"
	if _, _, _, err := s.CreateCompany("Acme", account.OwnerInput{FirstName: "Ana", Email: email, Password: password}); err != nil {
		t.Fatal(err)
	}
	login := func(cookie, pw string) (account.Session, error) {
		return s.Login(account.WithDevice(account.WithClient(context.Background(), "2001:db8:1::1"), cookie), email, pw)
	}
	sess, err := login("", password)
	if err != nil {
		t.Fatal(err)
	}
	// The same cookie with its signature's last byte changed: of the
	// address and still of the cookies' layout, so its user is read, but
	// not trusted. (A character of its text changed may leave base64url,
	// and a cookie that does not decode reads nothing.)
	raw, err := base64.RawURLEncoding.DecodeString(sess.Device)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	tampered := base64.RawURLEncoding.EncodeToString(raw)
	reads := func(what, cookie string) {
		t.Helper()
		n := st.byEmail.Load()
		if _, err := login(cookie, password); err != nil {
			t.Fatalf("%s: %v, want signed in", what, err)
		}
		if got := st.byEmail.Load() - n; got != 1 {
			t.Fatalf("%s: %d reads of the address's user, want 1", what, got)
		}
	}
	reads("a login with no cookie", "")
	reads("a login with a trusted cookie", sess.Device)
	reads("a login with a tampered cookie", tampered)
	for range account.DeviceFailures {
		if _, err := login(sess.Device, "Wrong-Horse-9"); !problem.Is(err, problem.InvalidLogin) {
			t.Fatalf("a wrong password with the cookie: %v, want invalid_credentials", err)
		}
	}
	reads("a login with a cookie past its failures", sess.Device)
}
