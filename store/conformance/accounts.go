package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// AccountsStore is what the accounts suite calls: companies and their API
// keys, users and invitations, refresh-token families, one-time tokens,
// console sessions and the server's secrets.
type AccountsStore interface {
	Base
	Company(id uint64) (store.Company, error)
	CompanyByAPIKeyHash(hash []byte) (store.Company, error)
	UpdateCompany(id uint64, fn func(*store.Company) error) (store.Company, error)
	CompanyIDs() ([]uint64, error)
	CreateUser(u *store.User) error
	User(id uint64) (store.User, error)
	UserByEmail(email string) (store.User, error)
	CompanyUsers(companyID uint64) ([]store.User, error)
	UpdateUser(id uint64, fn func(*store.User) error) (store.User, error)
	DeleteUser(id uint64) error
	InviteUser(u *store.User, now time.Time) (heldElsewhere bool, err error)
	StartRefreshFamily(hash []byte, t store.RefreshToken, now time.Time) error
	RotateRefreshToken(oldHash, newHash []byte, newExpiry, now time.Time) (store.RefreshToken, error)
	RevokeUserSessions(userID uint64) error
	PutOneTimeToken(hash []byte, t store.OneTimeToken) error
	ConsumeOneTimeToken(hash []byte, kinds []string, now time.Time, revokeSessions bool, fn func(*store.User) error) (store.User, error)
	PruneTokens(cutoff time.Time) (int, error)
	PruneTokenFamilies() (int, error)
	PutConsoleSession(hash []byte, sess store.ConsoleSession) error
	ConsoleSession(hash []byte) (store.ConsoleSession, error)
	TouchConsoleSession(hash []byte, at time.Time) error
	DeleteConsoleSession(hash []byte) error
	PruneConsoleSessions(idleCutoff, now time.Time) (int, error)
	PruneAbandonedSignups(cutoff, now time.Time, after uint64, limit int) (removed int, last uint64, err error)
	DashboardSummary(companyID uint64, from, to time.Time, limit int) (store.Summary, error)
	Secret(name string, size int) ([]byte, error)
	RotateSecrets(names []string, reseal store.Reseal) (replaced []string, resealed int, unopened []store.Company, err error)
}

// Accounts runs the suite of companies, users, invitations, sign-in tokens,
// console sessions and secrets.
func Accounts(t *testing.T, open Opener[AccountsStore]) {
	cases := []struct {
		name string
		run  func(*testing.T, AccountsStore)
	}{
		{"Companies", accountsCompanies},
		{"KeyRotation", accountsKeyRotation},
		{"KeyRotationRace", accountsKeyRotationRace},
		{"Users", accountsUsers},
		{"EmailCase", accountsEmailCase},
		{"LastAdmin", accountsLastAdmin},
		{"LastAdminRace", accountsLastAdminRace},
		{"DeleteUser", accountsDeleteUser},
		{"Invites", accountsInvites},
		{"UserLimit", accountsUserLimit},
		{"InviteAccepted", accountsInviteAccepted},
		{"Inviter", accountsInviter},
		{"RefreshRotation", accountsRefreshRotation},
		{"RefreshRace", accountsRefreshRace},
		{"RevokeUserSessions", accountsRevokeUserSessions},
		{"OneTimeTokens", accountsOneTimeTokens},
		{"OneTimeTokenRace", accountsOneTimeTokenRace},
		{"PruneTokens", accountsPruneTokens},
		{"ConsoleSessions", accountsConsoleSessions},
		{"PruneConsoleSessions", accountsPruneConsoleSessions},
		{"AbandonedSignups", accountsAbandonedSignups},
		{"AbandonedSignupRace", accountsAbandonedSignupRace},
		{"Secrets", accountsSecrets},
		{"RotateSecrets", accountsRotateSecrets},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { t.Parallel(); c.run(t, open(t)) })
	}
}

// InviteBudgetBytes is the daily storage budget of the stores the
// InviteBudget suite opens: two invitations a day.
const InviteBudgetBytes = 2 * store.InvitationCost

// InviteBudget runs the suite of the invitation's storage charge; open must
// give a store whose companies may add InviteBudgetBytes a day.
func InviteBudget(t *testing.T, open Opener[AccountsStore]) {
	t.Run("Charge", func(t *testing.T) { t.Parallel(); inviteBudget(t, open(t)) })
}

// accountUser makes a user record of the company with a fresh address.
func accountUser(companyID uint64, role string, password bool) store.User {
	u := store.User{CompanyID: companyID, FirstName: "Bo", Email: fmt.Sprintf("user-%d@example.com", unique()), Role: role, CreatedAt: T0}
	if password {
		u.PasswordHash = "set"
	}
	return u
}

// accountsCompanies: a company and its admin get ids; a company is found
// by id and by its key's hash; an address in use, whatever its case and
// blanks, refuses a new company and leaves nothing behind; CompanyIDs
// lists every company, oldest first.
func accountsCompanies(t *testing.T, s AccountsStore) {
	a, admin := Company(t, s)
	if a.ID == 0 || admin.ID == 0 || admin.CompanyID != a.ID || admin.Role != store.RoleAdmin {
		t.Fatalf("company %+v admin %+v", a, admin)
	}
	got, err := s.Company(a.ID)
	if err != nil || got.ID != a.ID || got.Name != a.Name || !bytes.Equal(got.APIKeyHash, a.APIKeyHash) || !got.CreatedAt.Equal(T0) {
		t.Fatalf("Company: %+v (%v), want %+v", got, err, a)
	}
	if got, err := s.CompanyByAPIKeyHash(a.APIKeyHash); err != nil || got.ID != a.ID {
		t.Fatalf("by key hash: %+v (%v)", got, err)
	}
	if _, err := s.CompanyByAPIKeyHash([]byte("no such key")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown key hash: %v, want ErrNotFound", err)
	}
	if _, err := s.Company(a.ID + 1000); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown company: %v, want ErrNotFound", err)
	}
	if u, err := s.User(admin.ID); err != nil || u.CompanyID != a.ID || u.Role != store.RoleAdmin || u.Email != admin.Email {
		t.Fatalf("the admin: %+v (%v)", u, err)
	}

	dup := store.Company{Name: "Dup", APIKeyHash: []byte(fmt.Sprintf("dup-%d", unique()))}
	if err := s.CreateCompany(&dup, &store.User{Email: " " + strings.ToUpper(admin.Email) + " ", PasswordHash: "set"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("an address in use: %v, want ErrConflict", err)
	}
	if _, err := s.CompanyByAPIKeyHash(dup.APIKeyHash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused company's key: %v, want ErrNotFound", err)
	}
	b, _ := Company(t, s)
	ids, err := s.CompanyIDs()
	if err != nil || len(ids) != 2 || ids[0] != a.ID || ids[1] != b.ID {
		t.Fatalf("CompanyIDs: %v (%v), want [%d %d]", ids, err, a.ID, b.ID)
	}
}

// accountsKeyRotation: UpdateCompany stores what fn changes, keeps the id,
// and moves a rotated key's lookup in the same commit; an error of fn
// stores nothing; an unknown company is ErrNotFound.
func accountsKeyRotation(t *testing.T, s AccountsStore) {
	c, _ := Company(t, s)
	other, _ := Company(t, s)
	old := c.APIKeyHash
	next := []byte(fmt.Sprintf("rotated-%d", unique()))
	got, err := s.UpdateCompany(c.ID, func(c *store.Company) error {
		c.Name, c.APIKeyHash, c.APIKeyCreatedAt = "Renamed", next, T0.Add(time.Hour)
		c.ID = 999999
		return nil
	})
	if err != nil || got.ID != c.ID || got.Name != "Renamed" || !bytes.Equal(got.APIKeyHash, next) {
		t.Fatalf("UpdateCompany: %+v (%v)", got, err)
	}
	if _, err := s.CompanyByAPIKeyHash(old); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the old key: %v, want ErrNotFound", err)
	}
	if got, err := s.CompanyByAPIKeyHash(next); err != nil || got.ID != c.ID || got.Name != "Renamed" {
		t.Fatalf("the new key: %+v (%v)", got, err)
	}
	if got, err := s.Company(c.ID); err != nil || got.Name != "Renamed" || !got.APIKeyCreatedAt.Equal(T0.Add(time.Hour)) {
		t.Fatalf("stored: %+v (%v)", got, err)
	}
	if got, err := s.CompanyByAPIKeyHash(other.APIKeyHash); err != nil || got.ID != other.ID {
		t.Fatalf("another company's key: %+v (%v)", got, err)
	}

	boom := errors.New("boom")
	if _, err := s.UpdateCompany(c.ID, func(c *store.Company) error {
		c.Name, c.APIKeyHash = "Lost", []byte("lost")
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("fn's error: %v, want it returned", err)
	}
	if got, _ := s.Company(c.ID); got.Name != "Renamed" {
		t.Fatalf("a failed update stored %+v", got)
	}
	if _, err := s.CompanyByAPIKeyHash([]byte("lost")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a failed update's key: %v, want ErrNotFound", err)
	}
	if _, err := s.UpdateCompany(other.ID+1000, func(*store.Company) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown company: %v, want ErrNotFound", err)
	}
}

// accountsKeyRotationRace: updates of one company at once each see the
// one before (none is lost); afterwards only the last key opens the company.
func accountsKeyRotationRace(t *testing.T, s AccountsStore) {
	c, _ := Company(t, s)
	const n = 8
	keys := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		keys[i] = []byte(fmt.Sprintf("race-%d-%d", c.ID, i))
		wg.Go(func() {
			if _, err := s.UpdateCompany(c.ID, func(c *store.Company) error {
				c.APIKeyHash, c.Address = keys[i], c.Address+"+"
				return nil
			}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	final, err := s.Company(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.Address != strings.Repeat("+", n) {
		t.Fatalf("after %d updates at once the company shows %q: an update was lost", n, final.Address)
	}
	for _, k := range append(keys, c.APIKeyHash) {
		_, err := s.CompanyByAPIKeyHash(k)
		if current := bytes.Equal(k, final.APIKeyHash); current != (err == nil) {
			t.Errorf("key %s (current %v): %v", k, current, err)
		}
	}
}

// accountsUsers: a user of a company is found by id and by address,
// whatever its case and blanks; an address in use is ErrConflict, an
// unknown company ErrNotFound; CompanyUsers lists the company's own,
// oldest first; UpdateUser keeps the id, company, address and creation
// time whatever fn does, and stores nothing when fn fails.
func accountsUsers(t *testing.T, s AccountsStore) {
	c, admin := Company(t, s)
	other, otherAdmin := Company(t, s)
	if got, err := s.UserByEmail("  " + strings.ToUpper(admin.Email)); err != nil || got.ID != admin.ID {
		t.Fatalf("by address in another case: %+v (%v)", got, err)
	}
	if _, err := s.UserByEmail("nobody@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown address: %v, want ErrNotFound", err)
	}
	dup := accountUser(c.ID, store.RoleMember, true)
	dup.Email = strings.ToUpper(otherAdmin.Email)
	if err := s.CreateUser(&dup); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("an address in use in another company: %v, want ErrConflict", err)
	}
	lost := accountUser(other.ID+1000, store.RoleMember, true)
	if err := s.CreateUser(&lost); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a user of an unknown company: %v, want ErrNotFound", err)
	}
	m := accountUser(c.ID, store.RoleMember, true)
	if err := s.CreateUser(&m); err != nil || m.ID == 0 {
		t.Fatalf("CreateUser: %+v (%v)", m, err)
	}
	if got, err := s.User(m.ID); err != nil || got.Email != m.Email || got.CompanyID != c.ID || got.Role != store.RoleMember || !got.CreatedAt.Equal(T0) {
		t.Fatalf("User: %+v (%v)", got, err)
	}
	if _, err := s.User(m.ID + 1000); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown user: %v, want ErrNotFound", err)
	}
	if us, err := s.CompanyUsers(c.ID); err != nil || len(us) != 2 || us[0].ID != admin.ID || us[1].ID != m.ID {
		t.Fatalf("CompanyUsers: %+v (%v), want the admin then the member", us, err)
	}
	if us, err := s.CompanyUsers(other.ID); err != nil || len(us) != 1 || us[0].ID != otherAdmin.ID {
		t.Fatalf("the other company's users: %+v (%v)", us, err)
	}

	got, err := s.UpdateUser(m.ID, func(u *store.User) error {
		u.FirstName, u.Phone = "Cy", "+15550001111"
		u.ID, u.CompanyID, u.Email, u.CreatedAt = 0, other.ID, otherAdmin.Email, T0.Add(time.Hour)
		return nil
	})
	if err != nil || got.ID != m.ID || got.CompanyID != c.ID || got.Email != m.Email || !got.CreatedAt.Equal(T0) || got.FirstName != "Cy" {
		t.Fatalf("UpdateUser: %+v (%v)", got, err)
	}
	if got, err := s.User(m.ID); err != nil || got.FirstName != "Cy" || got.Phone != "+15550001111" || got.Email != m.Email || got.CompanyID != c.ID {
		t.Fatalf("stored: %+v (%v)", got, err)
	}
	if got, err := s.UserByEmail(m.Email); err != nil || got.ID != m.ID {
		t.Fatalf("the member's address after the update: %+v (%v)", got, err)
	}
	if got, err := s.UserByEmail(otherAdmin.Email); err != nil || got.ID != otherAdmin.ID {
		t.Fatalf("the address fn tried to take: %+v (%v)", got, err)
	}
	if us, _ := s.CompanyUsers(other.ID); len(us) != 1 {
		t.Fatalf("the other company gained a user: %+v", us)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateUser(m.ID, func(u *store.User) error { u.FirstName = "Lost"; return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn's error: %v, want it returned", err)
	}
	if got, _ := s.User(m.ID); got.FirstName != "Cy" {
		t.Fatalf("a failed update stored %+v", got)
	}
	if _, err := s.UpdateUser(m.ID+1000, func(*store.User) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of an unknown user: %v, want ErrNotFound", err)
	}
}

// accountsEmailCase: an address is one account's whatever the case of
// its letters, folded as Go's strings.ToLower folds them on both backends
// (never by the database's lower(), whose answer depends on its locale):
// each letter by its simple Unicode mapping, so the Kelvin sign (U+212A)
// lowers to k and the dotted capital İ to a plain i ("\u212Aate@" is
// "kate@"'s address, "İnfo@" is "info@"'s), not to i and a combining dot;
// the long s ſ and the dotless ı lower to themselves, so "ſam@" and
// "quıt@" are not "sam@" and "quit@". The company's index of addresses
// (invitations) folds them the same way.
func accountsEmailCase(t *testing.T, s AccountsStore) {
	c, _ := Company(t, s)
	other, _ := Company(t, s)
	n := unique()
	addr := func(local string) string { return fmt.Sprintf("%s-%d@example.com", local, n) }
	create := func(companyID uint64, email string) (store.User, error) {
		u := accountUser(companyID, store.RoleMember, true)
		u.Email = email
		err := s.CreateUser(&u)
		return u, err
	}
	kate, err := create(c.ID, addr("kate"))
	if err != nil {
		t.Fatal(err)
	}
	dotted, err := create(c.ID, addr("İnfo"))
	if err != nil {
		t.Fatal(err)
	}
	sam, err := create(c.ID, addr("sam"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		email string
		want  uint64 // 0: no account
	}{
		{addr("\u212AATE"), kate.ID},
		{strings.ToUpper(addr("kate")), kate.ID},
		{addr("info"), dotted.ID},
		{" " + addr("İNFO") + " ", dotted.ID},
		{addr("i\u0307nfo"), 0},
		{addr("ınfo"), 0},
		{addr("SAM"), sam.ID},
		{addr("ſam"), 0},
	} {
		got, err := s.UserByEmail(tc.email)
		switch {
		case tc.want == 0 && !errors.Is(err, store.ErrNotFound):
			t.Errorf("UserByEmail(%q): %+v (%v), want ErrNotFound", tc.email, got, err)
		case tc.want != 0 && (err != nil || got.ID != tc.want):
			t.Errorf("UserByEmail(%q): %+v (%v), want user %d", tc.email, got, err, tc.want)
		}
	}
	for _, email := range []string{addr("\u212Aate"), addr("INFO")} {
		if _, err := create(other.ID, email); !errors.Is(err, store.ErrConflict) {
			t.Errorf("an account for %q, an address in use in another case: %v, want ErrConflict", email, err)
		}
	}
	for _, email := range []string{addr("ſam"), addr("quit"), addr("quıt")} {
		u, err := create(other.ID, email)
		if err != nil {
			t.Errorf("an account for %q: %v, want it created (no account holds that address)", email, err)
			continue
		}
		if got, err := s.UserByEmail(email); err != nil || got.ID != u.ID {
			t.Errorf("UserByEmail(%q): %+v (%v), want user %d", email, got, err, u.ID)
		}
	}
	if got, err := s.UserByEmail(addr("sam")); err != nil || got.ID != sam.ID {
		t.Errorf("UserByEmail(%q) after ſam's account: %+v (%v), want user %d", addr("sam"), got, err, sam.ID)
	}
	// Invitations: within the company an address is there once, as
	// ToLower folds it, and the account that holds it elsewhere is found
	// so.
	for _, email := range []string{addr("\u212AATE"), addr("INFO")} {
		inv := accountUser(c.ID, store.RoleMember, false)
		inv.Email = email
		if _, err := s.InviteUser(&inv, T0); !errors.Is(err, store.ErrConflict) {
			t.Errorf("an invitation of %q into the company where it is in use: %v, want ErrConflict", email, err)
		}
	}
	for _, tc := range []struct {
		company uint64
		email   string
		held    bool
	}{
		{c.ID, addr("ſam"), true},       // other's account ſam, not c's sam
		{other.ID, addr("İnfo"), true},  // c's account
		{other.ID, addr("ınfo"), false}, // no account's
	} {
		inv := accountUser(tc.company, store.RoleMember, false)
		inv.Email = tc.email
		if held, err := s.InviteUser(&inv, T0); err != nil || held != tc.held {
			t.Errorf("an invitation of %q into company %d: held %v (%v), want invited and held %v", tc.email, tc.company, held, err, tc.held)
		}
	}
}

// accountsLastAdmin: the last admin who can sign in can be neither demoted
// nor removed; an invited admin without a password does not stand in.
func accountsLastAdmin(t *testing.T, s AccountsStore) {
	c, admin := Company(t, s)
	demote := func(u *store.User) error { u.Role = store.RoleMember; return nil }
	if _, err := s.UpdateUser(admin.ID, demote); !errors.Is(err, store.ErrLastAdmin) {
		t.Fatalf("demote the last admin: %v, want ErrLastAdmin", err)
	}
	if got, _ := s.User(admin.ID); got.Role != store.RoleAdmin {
		t.Fatalf("the refused demotion was stored: %+v", got)
	}
	if err := s.DeleteUser(admin.ID); !errors.Is(err, store.ErrLastAdmin) {
		t.Fatalf("delete the last admin: %v, want ErrLastAdmin", err)
	}
	invited := accountUser(c.ID, store.RoleAdmin, false)
	if err := s.CreateUser(&invited); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(admin.ID); !errors.Is(err, store.ErrLastAdmin) {
		t.Fatalf("delete the last admin who can sign in: %v, want ErrLastAdmin", err)
	}
	if err := s.DeleteUser(invited.ID); err != nil {
		t.Fatal(err)
	}
	second := accountUser(c.ID, store.RoleAdmin, true)
	if err := s.CreateUser(&second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateUser(admin.ID, demote); err != nil {
		t.Fatalf("demote with another admin: %v", err)
	}
	if _, err := s.UpdateUser(admin.ID, func(u *store.User) error { u.FirstName = "Still member"; return nil }); err != nil {
		t.Fatalf("a member's other change: %v", err)
	}
	if err := s.DeleteUser(second.ID); !errors.Is(err, store.ErrLastAdmin) {
		t.Fatalf("delete the remaining admin: %v, want ErrLastAdmin", err)
	}
	if err := s.DeleteUser(admin.ID); err != nil {
		t.Fatalf("delete a member: %v", err)
	}
	if us, err := s.CompanyUsers(c.ID); err != nil || len(us) != 1 || us[0].ID != second.ID {
		t.Fatalf("users left: %+v (%v), want only %d", us, err, second.ID)
	}
}

// accountsLastAdminRace: two admins demoted or removed at once: one of
// each pair succeeds, the other is ErrLastAdmin, and the company keeps an
// admin.
func accountsLastAdminRace(t *testing.T, s AccountsStore) {
	for _, del := range []bool{false, true} {
		c, admin := Company(t, s)
		second := accountUser(c.ID, store.RoleAdmin, true)
		if err := s.CreateUser(&second); err != nil {
			t.Fatal(err)
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, id := range []uint64{admin.ID, second.ID} {
			wg.Go(func() {
				if del {
					errs[i] = s.DeleteUser(id)
				} else {
					_, errs[i] = s.UpdateUser(id, func(u *store.User) error { u.Role = store.RoleMember; return nil })
				}
			})
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), store.ErrLastAdmin) {
			t.Fatalf("delete %v: %v, want one success and one ErrLastAdmin", del, errs)
		}
		us, _ := s.CompanyUsers(c.ID)
		admins := 0
		for _, u := range us {
			if u.Role == store.RoleAdmin {
				admins++
			}
		}
		if admins != 1 {
			t.Fatalf("delete %v: %d admins left, want 1: %+v", del, admins, us)
		}
	}
}

// accountPairing stores a pairing code of the company, made by userID or
// (viaKey) with the API key in userID's name, valid for an hour from T0.
func accountPairing(t *testing.T, s AccountsStore, companyID, userID uint64, viaKey bool) []byte {
	t.Helper()
	code := []byte(fmt.Sprintf("pairing-%d", unique()))
	if err := s.PutPairing(code, store.Pairing{CompanyID: companyID, UserID: userID, ViaAPIKey: viaKey, ExpiresAt: T0.Add(time.Hour)}, T0); err != nil {
		t.Fatal(err)
	}
	return code
}

// accountRegister pairs a new phone with code, as the pairing's maker's.
func accountRegister(s AccountsStore, code []byte) error {
	_, _, _, err := s.RegisterDevice(code, T0, fmt.Sprintf("fp-%d", unique()), func(p store.Pairing, _ *store.Device) (store.Device, error) {
		return store.Device{UserID: p.UserID, Status: store.DeviceActive, TokenHash: []byte(fmt.Sprintf("token-%d", unique())), CreatedAt: T0}, nil
	})
	return err
}

// accountsDeleteUser: a removed user is gone with their address, which
// another signup may take, and with every session: refresh tokens are
// refused as revoked and console sessions end. The pairing codes they made
// that no phone used pair nothing after (not found); another user's do, and
// so do the API key's (ViaAPIKey, made in their name as the first admin's),
// which end when the key changes (UpdateCompany with another APIKeyHash),
// with no user's.
func accountsDeleteUser(t *testing.T, s AccountsStore) {
	c, admin := Company(t, s)
	m := accountUser(c.ID, store.RoleMember, true)
	if err := s.CreateUser(&m); err != nil {
		t.Fatal(err)
	}
	pairing := func(userID uint64, viaKey bool) []byte { return accountPairing(t, s, c.ID, userID, viaKey) }
	register := func(code []byte) error { return accountRegister(s, code) }
	mine, theirs, keys, keysLater := pairing(m.ID, false), pairing(admin.ID, false), pairing(m.ID, true), pairing(m.ID, true)
	adminsLater := pairing(admin.ID, false)
	rt := []byte(fmt.Sprintf("rt-%d", unique()))
	if err := s.StartRefreshFamily(rt, store.RefreshToken{UserID: m.ID, Family: fmt.Sprintf("fam-%d", unique()), ExpiresAt: T0.Add(time.Hour)}, T0); err != nil {
		t.Fatal(err)
	}
	cs := []byte(fmt.Sprintf("cs-%d", unique()))
	if err := s.PutConsoleSession(cs, store.ConsoleSession{UserID: m.ID, CompanyID: c.ID, CreatedAt: T0, SeenAt: T0, ExpiresAt: T0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.User(m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a removed user: %v, want ErrNotFound", err)
	}
	if _, err := s.UserByEmail(m.Email); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a removed user's address: %v, want ErrNotFound", err)
	}
	if _, err := s.RotateRefreshToken(rt, []byte(fmt.Sprintf("rt-%d", unique())), T0.Add(time.Hour), T0); !errors.Is(err, store.ErrTokenRevoked) {
		t.Fatalf("a removed user's refresh token: %v, want ErrTokenRevoked", err)
	}
	if _, err := s.ConsoleSession(cs); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a removed user's console session: %v, want ErrNotFound", err)
	}
	if err := register(mine); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a removed user's pairing code: %v, want ErrNotFound", err)
	}
	if err := register(theirs); err != nil {
		t.Fatalf("another user's pairing code: %v", err)
	}
	if err := register(keys); err != nil {
		t.Fatalf("the API key's pairing code made in the removed user's name: %v", err)
	}
	if _, err := s.UpdateCompany(c.ID, func(c *store.Company) error {
		c.APIKeyHash = []byte(fmt.Sprintf("rotated-%d", unique()))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := register(keysLater); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the API key's pairing code after the key changed: %v, want ErrNotFound", err)
	}
	if err := register(adminsLater); err != nil {
		t.Fatalf("a user's pairing code after the key changed: %v", err)
	}
	if err := s.DeleteUser(m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a second removal: %v, want ErrNotFound", err)
	}
	again := store.Company{Name: "Again", APIKeyHash: []byte(fmt.Sprintf("again-%d", unique()))}
	owner := store.User{Email: m.Email, PasswordHash: "set"}
	if err := s.CreateCompany(&again, &owner); err != nil {
		t.Fatalf("a signup with a removed user's address: %v", err)
	}
	if got, err := s.UserByEmail(m.Email); err != nil || got.ID != owner.ID {
		t.Fatalf("the address's new account: %+v (%v)", got, err)
	}
}

// accountsInvites: an invitee has no password and holds no address: it is
// listed by its company, not found by address, and blocks neither a signup
// nor another company's invitation. Within a company an address is there
// once (ErrConflict), whatever its case and whichever way the user came.
// heldElsewhere says whether an account holds the address. Removing a
// pending invitee frees nothing of the account elsewhere that holds its
// address.
func accountsInvites(t *testing.T, s AccountsStore) {
	a, adminA := Company(t, s)
	b, _ := Company(t, s)
	inv := accountUser(a.ID, store.RoleMember, false)
	held, err := s.InviteUser(&inv, T0)
	if err != nil || held || inv.ID == 0 {
		t.Fatalf("invite: id %d held %v (%v), want an id and not held", inv.ID, held, err)
	}
	if got, err := s.User(inv.ID); err != nil || got.CompanyID != a.ID || got.PasswordHash != "" || got.Email != inv.Email {
		t.Fatalf("the invitee: %+v (%v)", got, err)
	}
	if us, _ := s.CompanyUsers(a.ID); len(us) != 2 || us[1].ID != inv.ID {
		t.Fatalf("company users: %+v, want the admin and the invitee", us)
	}
	if _, err := s.UserByEmail(inv.Email); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a pending invitee by address: %v, want ErrNotFound", err)
	}
	for _, email := range []string{strings.ToUpper(inv.Email), adminA.Email} {
		again := accountUser(a.ID, store.RoleMember, false)
		again.Email = email
		if _, err := s.InviteUser(&again, T0); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("invite %s again within the company: %v, want ErrConflict", email, err)
		}
	}
	member := accountUser(a.ID, store.RoleMember, true)
	member.Email = strings.ToUpper(inv.Email)
	if err := s.CreateUser(&member); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a member with a pending invitee's address in its company: %v, want ErrConflict", err)
	}
	if _, err := s.InviteUser(&store.User{CompanyID: b.ID + 1000, Email: "x@example.com", Role: store.RoleMember}, T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an invitation into an unknown company: %v, want ErrNotFound", err)
	}

	inB := accountUser(b.ID, store.RoleMember, false)
	inB.Email = inv.Email
	if held, err := s.InviteUser(&inB, T0); err != nil || held {
		t.Fatalf("another company invites a pending invitee's address: held %v (%v), want allowed and not held", held, err)
	}
	c := store.Company{Name: "Signup", APIKeyHash: []byte(fmt.Sprintf("signup-%d", unique()))}
	owner := store.User{Email: inv.Email, PasswordHash: "set"}
	if err := s.CreateCompany(&c, &owner); err != nil {
		t.Fatalf("a signup with a pending invitee's address: %v", err)
	}
	heldInv := accountUser(b.ID, store.RoleMember, false)
	heldInv.Email = " " + strings.ToUpper(adminA.Email)
	if held, err := s.InviteUser(&heldInv, T0); err != nil || !held {
		t.Fatalf("invite an address held in another company: held %v (%v), want allowed and held", held, err)
	}
	if err := s.DeleteUser(inv.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(heldInv.ID); err != nil {
		t.Fatal(err)
	}
	for _, u := range []store.User{owner, adminA} {
		if got, err := s.UserByEmail(u.Email); err != nil || got.ID != u.ID {
			t.Fatalf("%s after its pending invitees left: %+v (%v), want user %d", u.Email, got, err, u.ID)
		}
	}
}

// accountsInviter: an invitee keeps the id of the user who invited it
// (InvitedBy) through its acceptance, a change of its record and the
// inviter's removal, after which it still reads, alone and in its
// company's list; an invitation made without one reads zero. The activity
// line names the inviter by address while it is a user of the company.
func accountsInviter(t *testing.T, s AccountsStore) {
	a, _ := Company(t, s)
	inviter := accountUser(a.ID, store.RoleAdmin, true)
	if err := s.CreateUser(&inviter); err != nil {
		t.Fatal(err)
	}
	inv := accountUser(a.ID, store.RoleMember, false)
	inv.InvitedBy = inviter.ID
	keyed := accountUser(a.ID, store.RoleMember, false)
	for _, u := range []*store.User{&inv, &keyed} {
		if _, err := s.InviteUser(u, T0); err != nil {
			t.Fatal(err)
		}
	}
	read := func(when string, id, want uint64) {
		t.Helper()
		if got, err := s.User(id); err != nil || got.InvitedBy != want {
			t.Fatalf("%s: user %d invited by %d (%v), want %d", when, id, got.InvitedBy, err, want)
		}
		us, err := s.CompanyUsers(a.ID)
		if err != nil {
			t.Fatalf("%s: company users: %v", when, err)
		}
		for _, u := range us {
			if u.ID == id && u.InvitedBy != want {
				t.Fatalf("%s: user %d in the company's list invited by %d, want %d", when, id, u.InvitedBy, want)
			}
		}
	}
	read("invited", inv.ID, inviter.ID)
	read("invited with no inviter", keyed.ID, 0)
	got, err := s.DashboardSummary(a.ID, T0, T0.Add(time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		inv.Email + " invited as member by " + inviter.Email: true,
		keyed.Email + " invited as member":                   true,
	}
	for _, ev := range got.Recent {
		if ev.Type == store.ActUserInvited {
			delete(want, ev.Description)
		}
	}
	if len(want) != 0 {
		t.Fatalf("activity %+v lacks %v", got.Recent, want)
	}

	tok := []byte(fmt.Sprintf("inviter-%d", unique()))
	if err := s.PutOneTimeToken(tok, store.OneTimeToken{Kind: "invite", UserID: inv.ID, ExpiresAt: T0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeOneTimeToken(tok, []string{"invite"}, T0, true, func(u *store.User) error { u.PasswordHash, u.EmailVerified = "chosen", true; return nil }); err != nil {
		t.Fatal(err)
	}
	read("accepted", inv.ID, inviter.ID)
	if _, err := s.UpdateUser(inv.ID, func(u *store.User) error { u.LastName = "Renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	read("renamed", inv.ID, inviter.ID)
	if err := s.DeleteUser(inviter.ID); err != nil {
		t.Fatal(err)
	}
	read("its inviter removed", inv.ID, inviter.ID)
}

// accountsInviteAccepted: an invitee who sets a password through the
// invitation's token holds the address from then on; one whose address an
// account took meanwhile is ErrConflict, and neither the token nor the
// user changes. The acceptance changes neither the invitee's address nor
// its company, which is still the address's only user.
func accountsInviteAccepted(t *testing.T, s AccountsStore) {
	a, _ := Company(t, s)
	inv := accountUser(a.ID, store.RoleMember, false)
	late := accountUser(a.ID, store.RoleMember, false)
	for _, u := range []*store.User{&inv, &late} {
		if _, err := s.InviteUser(u, T0); err != nil {
			t.Fatal(err)
		}
	}
	accept := func(u *store.User) error { u.PasswordHash, u.EmailVerified = "chosen", true; return nil }
	tok, lateTok := []byte(fmt.Sprintf("inv-%d", unique())), []byte(fmt.Sprintf("inv-%d", unique()))
	for h, u := range map[string]store.User{string(tok): inv, string(lateTok): late} {
		if err := s.PutOneTimeToken([]byte(h), store.OneTimeToken{Kind: "invite", UserID: u.ID, ExpiresAt: T0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	// fn's changes of the address or the company are not stored.
	moving := func(u *store.User) error { u.Email, u.CompanyID = "moved-"+u.Email, u.CompanyID+1000; return accept(u) }
	got, err := s.ConsumeOneTimeToken(tok, []string{"reset", "invite"}, T0, true, moving)
	if err != nil || got.ID != inv.ID || got.PasswordHash != "chosen" || got.Email != inv.Email || got.CompanyID != a.ID {
		t.Fatalf("accept: %+v (%v)", got, err)
	}
	if stored, err := s.User(inv.ID); err != nil || stored.Email != inv.Email || stored.CompanyID != a.ID {
		t.Fatalf("the accepted invitee as stored: %+v (%v), want address %s in company %d", stored, err, inv.Email, a.ID)
	}
	again := accountUser(a.ID, store.RoleMember, false)
	again.Email = strings.ToUpper(inv.Email)
	if _, err := s.InviteUser(&again, T0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("invite an accepted invitee's address into its company: %v, want ErrConflict", err)
	}
	if got, err := s.UserByEmail(inv.Email); err != nil || got.ID != inv.ID || !got.EmailVerified {
		t.Fatalf("the accepted invitee by address: %+v (%v)", got, err)
	}
	other := store.Company{Name: "Taken", APIKeyHash: []byte(fmt.Sprintf("taken-%d", unique()))}
	if err := s.CreateCompany(&other, &store.User{Email: inv.Email, PasswordHash: "set"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a signup with an accepted invitee's address: %v, want ErrConflict", err)
	}

	meanwhile := store.Company{Name: "Meanwhile", APIKeyHash: []byte(fmt.Sprintf("meanwhile-%d", unique()))}
	owner := store.User{Email: strings.ToUpper(late.Email), PasswordHash: "set"}
	if err := s.CreateCompany(&meanwhile, &owner); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeOneTimeToken(lateTok, []string{"invite"}, T0, true, accept); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("accept an address taken meanwhile: %v, want ErrConflict", err)
	}
	if got, _ := s.User(late.ID); got.PasswordHash != "" {
		t.Fatalf("the refused acceptance was stored: %+v", got)
	}
	if got, err := s.UserByEmail(late.Email); err != nil || got.ID != owner.ID {
		t.Fatalf("the address's account: %+v (%v), want %d", got, err, owner.ID)
	}
	if _, err := s.ConsumeOneTimeToken(lateTok, []string{"invite"}, T0, true, func(*store.User) error { return nil }); err != nil {
		t.Fatalf("the token of the refused acceptance is still good: %v", err)
	}
}

// refreshFamily starts a refresh-token family of the user and returns its first token's hash.
func refreshFamily(t *testing.T, s AccountsStore, userID uint64, expires time.Time) []byte {
	t.Helper()
	h := []byte(fmt.Sprintf("rt-%d", unique()))
	if err := s.StartRefreshFamily(h, store.RefreshToken{UserID: userID, Family: fmt.Sprintf("fam-%d", unique()), ExpiresAt: expires}, T0); err != nil {
		t.Fatal(err)
	}
	return h
}

func refreshHash() []byte { return []byte(fmt.Sprintf("rt-%d", unique())) }

// accountsRefreshRotation: a refresh token is spent once for the next of
// its family; presented again it revokes the family (ErrTokenReused, with
// the spent token for the log), after which every token of it is
// ErrTokenRevoked; an expired token is ErrTokenExpired, an unknown one
// ErrNotFound.
func accountsRefreshRotation(t *testing.T, s AccountsStore) {
	_, u := Company(t, s)
	t1 := refreshFamily(t, s, u.ID, T0.Add(time.Hour))
	t2, t3 := refreshHash(), refreshHash()
	old, err := s.RotateRefreshToken(t1, t2, T0.Add(2*time.Hour), T0)
	if err != nil || old.UserID != u.ID {
		t.Fatalf("rotate: %+v (%v)", old, err)
	}
	// t2 expires an hour after t1 did: the new expiry is stored.
	if _, err := s.RotateRefreshToken(t2, t3, T0.Add(3*time.Hour), T0.Add(90*time.Minute)); err != nil {
		t.Fatalf("rotate the next token: %v", err)
	}
	old, err = s.RotateRefreshToken(t1, refreshHash(), T0.Add(time.Hour), T0)
	if !errors.Is(err, store.ErrTokenReused) || old.UserID != u.ID {
		t.Fatalf("reuse: %+v (%v), want ErrTokenReused naming the user", old, err)
	}
	if _, err := s.RotateRefreshToken(t3, refreshHash(), T0.Add(time.Hour), T0); !errors.Is(err, store.ErrTokenRevoked) {
		t.Fatalf("after a reuse the family is revoked: %v, want ErrTokenRevoked", err)
	}
	if _, err := s.RotateRefreshToken(t1, refreshHash(), T0.Add(time.Hour), T0); !errors.Is(err, store.ErrTokenRevoked) {
		t.Fatalf("the reused token again: %v, want ErrTokenRevoked", err)
	}

	live := refreshFamily(t, s, u.ID, T0.Add(time.Hour))
	if _, err := s.RotateRefreshToken(live, refreshHash(), T0.Add(2*time.Hour), T0.Add(time.Hour)); !errors.Is(err, store.ErrTokenExpired) {
		t.Fatalf("an expired token: %v, want ErrTokenExpired", err)
	}
	if _, err := s.RotateRefreshToken(live, refreshHash(), T0.Add(2*time.Hour), T0); err != nil {
		t.Fatalf("another family is untouched by the revocation: %v", err)
	}
	if _, err := s.RotateRefreshToken(refreshHash(), refreshHash(), T0.Add(time.Hour), T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown token: %v, want ErrNotFound", err)
	}

	// The family's password generation is handed down every rotation.
	g1, g2, g3 := refreshHash(), refreshHash(), refreshHash()
	if err := s.StartRefreshFamily(g1, store.RefreshToken{UserID: u.ID, Family: fmt.Sprintf("fam-%d", unique()), ExpiresAt: T0.Add(time.Hour), Generation: 3}, T0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RotateRefreshToken(g1, g2, T0.Add(time.Hour), T0); err != nil {
		t.Fatal(err)
	}
	if got, err := s.RotateRefreshToken(g2, g3, T0.Add(time.Hour), T0); err != nil || got.Generation != 3 {
		t.Fatalf("a rotated token: %+v (%v), want generation 3", got, err)
	}
}

// accountsRefreshRace: one token refreshed by many at once has one winner;
// the others reuse it, which revokes the family, the winner's token too.
func accountsRefreshRace(t *testing.T, s AccountsStore) {
	_, u := Company(t, s)
	tok := refreshFamily(t, s, u.ID, T0.Add(time.Hour))
	const n = 8
	next := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		next[i] = refreshHash()
		wg.Go(func() { _, errs[i] = s.RotateRefreshToken(tok, next[i], T0.Add(time.Hour), T0) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Fatalf("two winners: %d and %d", winner, i)
		case !errors.Is(err, store.ErrTokenReused) && !errors.Is(err, store.ErrTokenRevoked):
			t.Fatalf("a loser: %v, want ErrTokenReused or ErrTokenRevoked", err)
		}
	}
	if winner < 0 {
		t.Fatalf("no winner: %v", errs)
	}
	if _, err := s.RotateRefreshToken(next[winner], refreshHash(), T0.Add(time.Hour), T0); !errors.Is(err, store.ErrTokenRevoked) {
		t.Fatalf("the winner's token after the reuses: %v, want ErrTokenRevoked", err)
	}
}

// accountSession stores a console session of the user and returns its hash.
func accountSession(t *testing.T, s AccountsStore, u store.User, seen, expires time.Time) []byte {
	t.Helper()
	h := []byte(fmt.Sprintf("cs-%d", unique()))
	if err := s.PutConsoleSession(h, store.ConsoleSession{UserID: u.ID, CompanyID: u.CompanyID, CSRF: "csrf", CreatedAt: seen, SeenAt: seen, ExpiresAt: expires, Generation: 2}); err != nil {
		t.Fatal(err)
	}
	return h
}

// accountsRevokeUserSessions: every refresh family, console session and
// unused pairing code of the user ends (not the API key's codes made in the
// user's name); another user's stay.
func accountsRevokeUserSessions(t *testing.T, s AccountsStore) {
	c, u := Company(t, s)
	other := accountUser(c.ID, store.RoleMember, true)
	if err := s.CreateUser(&other); err != nil {
		t.Fatal(err)
	}
	mine := [][]byte{refreshFamily(t, s, u.ID, T0.Add(time.Hour)), refreshFamily(t, s, u.ID, T0.Add(time.Hour))}
	theirs := refreshFamily(t, s, other.ID, T0.Add(time.Hour))
	myConsole := accountSession(t, s, u, T0, T0.Add(time.Hour))
	theirConsole := accountSession(t, s, other, T0, T0.Add(time.Hour))
	pairing := func(userID uint64, viaKey bool) []byte { return accountPairing(t, s, c.ID, userID, viaKey) }
	register := func(code []byte) error { return accountRegister(s, code) }
	myCode, keysCode, theirCode := pairing(u.ID, false), pairing(u.ID, true), pairing(other.ID, false)
	if err := s.RevokeUserSessions(u.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeUserSessions(u.ID); err != nil {
		t.Fatalf("a second revocation: %v", err)
	}
	for _, h := range mine {
		if _, err := s.RotateRefreshToken(h, refreshHash(), T0.Add(time.Hour), T0); !errors.Is(err, store.ErrTokenRevoked) {
			t.Fatalf("a revoked family's token: %v, want ErrTokenRevoked", err)
		}
	}
	if _, err := s.ConsoleSession(myConsole); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a revoked console session: %v, want ErrNotFound", err)
	}
	if _, err := s.RotateRefreshToken(theirs, refreshHash(), T0.Add(time.Hour), T0); err != nil {
		t.Fatalf("another user's family: %v", err)
	}
	if _, err := s.ConsoleSession(theirConsole); err != nil {
		t.Fatalf("another user's console session: %v", err)
	}
	if err := register(myCode); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a pairing code the user made: %v, want ErrNotFound", err)
	}
	if err := register(keysCode); err != nil {
		t.Fatalf("the API key's pairing code in the user's name: %v", err)
	}
	if err := register(theirCode); err != nil {
		t.Fatalf("another user's pairing code: %v", err)
	}
}

// accountsOneTimeTokens: a token is spent once, by one of its kinds, before
// its expiry, together with fn's change of its user; a failing fn spends
// nothing; revokeSessions ends the user's sessions in the same commit.
func accountsOneTimeTokens(t *testing.T, s AccountsStore) {
	_, u := Company(t, s)
	put := func(kind string, userID uint64, expires time.Time) []byte {
		h := []byte(fmt.Sprintf("ott-%d", unique()))
		if err := s.PutOneTimeToken(h, store.OneTimeToken{Kind: kind, UserID: userID, ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
		return h
	}
	verify := func(u *store.User) error { u.EmailVerified = true; return nil }
	v := put("verify", u.ID, T0.Add(time.Hour))
	if _, err := s.ConsumeOneTimeToken(v, []string{"reset", "invite"}, T0, false, verify); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another kind: %v, want ErrNotFound", err)
	}
	if _, err := s.ConsumeOneTimeToken(v, []string{"verify"}, T0.Add(time.Hour), false, verify); !errors.Is(err, store.ErrTokenExpired) {
		t.Fatalf("expired: %v, want ErrTokenExpired", err)
	}
	boom := errors.New("boom")
	if _, err := s.ConsumeOneTimeToken(v, []string{"verify"}, T0, false, func(u *store.User) error { u.EmailVerified = true; return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn's error: %v, want it returned", err)
	}
	if got, _ := s.User(u.ID); got.EmailVerified {
		t.Fatal("a failed fn's change was stored")
	}
	rt := refreshFamily(t, s, u.ID, T0.Add(time.Hour))
	cs := accountSession(t, s, u, T0, T0.Add(time.Hour))
	got, err := s.ConsumeOneTimeToken(v, []string{"verify"}, T0, false, verify)
	if err != nil || got.ID != u.ID || !got.EmailVerified {
		t.Fatalf("consume: %+v (%v)", got, err)
	}
	if stored, _ := s.User(u.ID); !stored.EmailVerified {
		t.Fatal("the change was not stored")
	}
	if _, err := s.ConsumeOneTimeToken(v, []string{"verify"}, T0, false, verify); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second use: %v, want ErrNotFound", err)
	}
	if _, err := s.ConsoleSession(cs); err != nil {
		t.Fatalf("a consume without revokeSessions ended a console session: %v", err)
	}

	r := put("reset", u.ID, T0.Add(time.Hour))
	if _, err := s.ConsumeOneTimeToken(r, []string{"reset", "invite"}, T0, true, func(u *store.User) error { u.PasswordHash = "new"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RotateRefreshToken(rt, refreshHash(), T0.Add(time.Hour), T0); !errors.Is(err, store.ErrTokenRevoked) {
		t.Fatalf("a refresh token after a reset: %v, want ErrTokenRevoked", err)
	}
	if _, err := s.ConsoleSession(cs); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a console session after a reset: %v, want ErrNotFound", err)
	}
	if got, _ := s.UserByEmail(u.Email); got.PasswordHash != "new" {
		t.Fatalf("the reset's password: %+v", got)
	}

	// A token mailed under an earlier TokenGeneration is dead once a reset
	// moved it on; one mailed under the current generation works.
	earlier, reset := put("reset", u.ID, T0.Add(time.Hour)), put("reset", u.ID, T0.Add(time.Hour))
	next := func(u *store.User) error { u.TokenGeneration++; return nil }
	if got, err := s.ConsumeOneTimeToken(reset, []string{"reset"}, T0, true, next); err != nil || got.TokenGeneration != 1 {
		t.Fatalf("reset moving the generation on: %+v (%v)", got, err)
	}
	if _, err := s.ConsumeOneTimeToken(earlier, []string{"reset"}, T0, true, next); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a token of an earlier generation: %v, want ErrNotFound", err)
	}
	current := []byte(fmt.Sprintf("ott-%d", unique()))
	if err := s.PutOneTimeToken(current, store.OneTimeToken{Kind: "reset", UserID: u.ID, ExpiresAt: T0.Add(time.Hour), Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeOneTimeToken(current, []string{"reset"}, T0, true, next); err != nil {
		t.Fatalf("a token of the current generation: %v", err)
	}

	if _, err := s.ConsumeOneTimeToken([]byte("no such token"), []string{"verify"}, T0, false, verify); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown token: %v, want ErrNotFound", err)
	}
	// A token of a user removed since it was mailed is not spent; one of a
	// user who is not stored is not stored either.
	member := store.User{CompanyID: u.CompanyID, FirstName: "Gone", Email: fmt.Sprintf("gone-%d@example.com", unique()), PasswordHash: "set", Role: store.RoleMember, EmailVerified: true, CreatedAt: T0}
	if err := s.CreateUser(&member); err != nil {
		t.Fatal(err)
	}
	gone := put("verify", member.ID, T0.Add(time.Hour))
	if err := s.DeleteUser(member.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.PutOneTimeToken([]byte(fmt.Sprintf("ott-%d", unique())), store.OneTimeToken{Kind: "verify", UserID: member.ID, ExpiresAt: T0.Add(time.Hour)}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a token of a user who is not stored: %v, want ErrNotFound", err)
	}
	if _, err := s.ConsumeOneTimeToken(gone, []string{"verify"}, T0, false, verify); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a token of a user who is gone: %v, want ErrNotFound", err)
	}
}

// accountsOneTimeTokenRace: a token spent by many at once is spent once.
func accountsOneTimeTokenRace(t *testing.T, s AccountsStore) {
	_, u := Company(t, s)
	h := []byte(fmt.Sprintf("ott-%d", unique()))
	if err := s.PutOneTimeToken(h, store.OneTimeToken{Kind: "reset", UserID: u.ID, ExpiresAt: T0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.ConsumeOneTimeToken(h, []string{"reset"}, T0, true, func(u *store.User) error {
				u.LastName = fmt.Sprint(i)
				return nil
			})
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrNotFound):
			t.Fatalf("a loser: %v, want ErrNotFound", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d uses of one token, want 1", wins)
	}
}

// accountsPruneTokens: PruneTokens drops refresh and one-time tokens that
// expired before the cutoff, used or not; PruneTokenFamilies then drops
// the families without a token left. A family that still has a token
// stays, revoked or not, so that token is still refused as its family says.
func accountsPruneTokens(t *testing.T, s AccountsStore) {
	c, u := Company(t, s)
	v := accountUser(c.ID, store.RoleMember, true)
	if err := s.CreateUser(&v); err != nil {
		t.Fatal(err)
	}
	now := T0.Add(31 * 24 * time.Hour)
	// done: its one token was used and expired long ago.
	done := refreshFamily(t, s, u.ID, T0.Add(time.Hour))
	if _, err := s.RotateRefreshToken(done, refreshHash(), T0.Add(2*time.Hour), T0); err != nil {
		t.Fatal(err)
	}
	live := refreshFamily(t, s, u.ID, now.Add(time.Hour))
	revoked := refreshFamily(t, s, v.ID, now.Add(time.Hour))
	if err := s.RevokeUserSessions(v.ID); err != nil {
		t.Fatal(err)
	}
	for i, exp := range []time.Time{now.Add(-48 * time.Hour), now.Add(48 * time.Hour)} {
		h := []byte(fmt.Sprintf("ott-%d-%d", c.ID, i))
		if err := s.PutOneTimeToken(h, store.OneTimeToken{Kind: "reset", UserID: u.ID, ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	// Gone: done's two tokens and the old one-time token.
	if n, err := s.PruneTokens(now.Add(-24 * time.Hour)); err != nil || n != 3 {
		t.Fatalf("PruneTokens: %d (%v), want 3", n, err)
	}
	if n, err := s.PruneTokenFamilies(); err != nil || n != 1 {
		t.Fatalf("PruneTokenFamilies: %d (%v), want 1", n, err)
	}
	if n, err := s.PruneTokenFamilies(); err != nil || n != 0 {
		t.Fatalf("PruneTokenFamilies again: %d (%v), want 0", n, err)
	}
	if _, err := s.RotateRefreshToken(done, refreshHash(), now.Add(time.Hour), now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a pruned token: %v, want ErrNotFound", err)
	}
	if _, err := s.RotateRefreshToken(revoked, refreshHash(), now.Add(time.Hour), now); !errors.Is(err, store.ErrTokenRevoked) {
		t.Fatalf("the revoked family's token: %v, want ErrTokenRevoked", err)
	}
	if _, err := s.RotateRefreshToken(live, refreshHash(), now.Add(time.Hour), now); err != nil {
		t.Fatalf("the live family's token: %v", err)
	}
	if _, err := s.ConsumeOneTimeToken([]byte(fmt.Sprintf("ott-%d-0", c.ID)), []string{"reset"}, now, false, func(*store.User) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a pruned one-time token: %v, want ErrNotFound", err)
	}
	if _, err := s.ConsumeOneTimeToken([]byte(fmt.Sprintf("ott-%d-1", c.ID)), []string{"reset"}, now, false, func(*store.User) error { return nil }); err != nil {
		t.Fatalf("a live one-time token was pruned: %v", err)
	}
}

// accountsConsoleSessions: a session is found by its hash until deleted;
// touching moves its last activity forward and nothing else (a touch of an
// earlier time, one that committed after a later one, leaves it); touching
// or deleting a session that is gone is no error.
func accountsConsoleSessions(t *testing.T, s AccountsStore) {
	_, u := Company(t, s)
	h := accountSession(t, s, u, T0, T0.Add(12*time.Hour))
	got, err := s.ConsoleSession(h)
	if err != nil || got.UserID != u.ID || got.CompanyID != u.CompanyID || got.CSRF != "csrf" || !got.SeenAt.Equal(T0) || !got.ExpiresAt.Equal(T0.Add(12*time.Hour)) {
		t.Fatalf("ConsoleSession: %+v (%v)", got, err)
	}
	if err := s.TouchConsoleSession(h, T0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ConsoleSession(h); err != nil || !got.SeenAt.Equal(T0.Add(time.Hour)) || !got.CreatedAt.Equal(T0) || got.CSRF != "csrf" || !got.ExpiresAt.Equal(T0.Add(12*time.Hour)) || got.Generation != 2 {
		t.Fatalf("after a touch: %+v (%v)", got, err)
	}
	if err := s.TouchConsoleSession(h, T0.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ConsoleSession(h); err != nil || !got.SeenAt.Equal(T0.Add(time.Hour)) {
		t.Fatalf("after an earlier touch committed last: seen %v (%v), want the later %v kept", got.SeenAt, err, T0.Add(time.Hour))
	}
	other := accountSession(t, s, u, T0, T0.Add(12*time.Hour))
	if err := s.DeleteConsoleSession(h); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsoleSession(h); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted session: %v, want ErrNotFound", err)
	}
	if _, err := s.ConsoleSession(other); err != nil {
		t.Fatalf("the user's other session: %v", err)
	}
	if err := s.DeleteConsoleSession(h); err != nil {
		t.Fatalf("delete a deleted session: %v", err)
	}
	if err := s.TouchConsoleSession(h, T0.Add(2*time.Hour)); err != nil {
		t.Fatalf("touch a deleted session: %v", err)
	}
	if _, err := s.ConsoleSession(h); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a touch brought a deleted session back: %v", err)
	}
}

// accountsPruneConsoleSessions: sessions idle since before the cutoff or
// at their absolute end go; the others stay.
func accountsPruneConsoleSessions(t *testing.T, s AccountsStore) {
	_, u := Company(t, s)
	now := T0.Add(24 * time.Hour)
	idle := accountSession(t, s, u, now.Add(-3*time.Hour), now.Add(time.Hour))
	ended := accountSession(t, s, u, now.Add(-time.Minute), now)
	touched := accountSession(t, s, u, now.Add(-3*time.Hour), now.Add(time.Hour))
	if err := s.TouchConsoleSession(touched, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	live := accountSession(t, s, u, now.Add(-2*time.Hour), now.Add(time.Second))
	n, err := s.PruneConsoleSessions(now.Add(-2*time.Hour), now)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	for name, h := range map[string][]byte{"idle": idle, "ended": ended, "touched": touched, "live": live} {
		_, err := s.ConsoleSession(h)
		if gone := errors.Is(err, store.ErrNotFound); gone != (name == "idle" || name == "ended") {
			t.Errorf("session %s: %v", name, err)
		}
	}
	if n, err := s.PruneConsoleSessions(now.Add(-2*time.Hour), now); err != nil || n != 0 {
		t.Fatalf("pruned again %d (%v), want 0", n, err)
	}
}

// accountsSecrets: a secret is made once, of the size asked, and the same
// bytes come back for its name ever after, even to callers that ask for
// it first at the same time; another name is another secret.
func accountsSecrets(t *testing.T, s AccountsStore) {
	const n = 8
	got := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			if got[i], err = s.Secret("jwt", 32); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(got[0]) != 32 || bytes.Equal(got[0], make([]byte, 32)) {
		t.Fatalf("secret: %x, want 32 random bytes", got[0])
	}
	for i := range n {
		if !bytes.Equal(got[i], got[0]) {
			t.Fatalf("callers at once got different secrets: %x and %x", got[0], got[i])
		}
	}
	again, err := s.Secret("jwt", 32)
	if err != nil || !bytes.Equal(again, got[0]) {
		t.Fatalf("the secret changed: %x (%v)", again, err)
	}
	other, err := s.Secret("other", 16)
	if err != nil || len(other) != 16 || bytes.Equal(other, got[0][:16]) {
		t.Fatalf("another secret: %x (%v)", other, err)
	}
}

// accountsRotateSecrets: RotateSecrets replaces each named secret the store
// holds with fresh bytes of its size, leaves a name it does not hold unmade,
// and hands every company's sealed API key to reseal with the old and fresh
// bytes, keeping what it returns; the key's hash (its lookup) is untouched.
// An error from reseal writes nothing: the secrets and the sealed keys stay.
// One that is store.ErrSealedUnopened does not fail the rotation: that
// company's sealed key is kept as it is and the company is returned, the
// others re-sealed.
func accountsRotateSecrets(t *testing.T, s AccountsStore) {
	jwt, err := s.Secret("jwt", 32)
	if err != nil {
		t.Fatal(err)
	}
	seal, err := s.Secret("seal", 16)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.Secret("kept", 8)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	bare, _ := Company(t, s) // no sealed key: reseal never sees it
	for _, c := range []store.Company{a, b} {
		if _, err := s.UpdateCompany(c.ID, func(c *store.Company) error {
			c.APIKeySealed = fmt.Appendf(nil, "sealed-%d", c.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"jwt", "seal", "absent", "jwt"}

	// reseal failing on the second company: nothing is written.
	calls := 0
	_, _, _, err = s.RotateSecrets(names, func(old, fresh map[string][]byte, sealed []byte) ([]byte, error) {
		if calls++; calls == 2 {
			return nil, errors.New("refused")
		}
		return append([]byte("new-"), sealed...), nil
	})
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("rotate with a failing reseal: %v, want its error", err)
	}
	for name, want := range map[string][]byte{"jwt": jwt, "seal": seal} {
		if got, err := s.Secret(name, len(want)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("secret %s after a failed rotation: %x (%v), want it as it was", name, got, err)
		}
	}
	for _, c := range []store.Company{a, b} {
		if got, err := s.Company(c.ID); err != nil || string(got.APIKeySealed) != fmt.Sprintf("sealed-%d", c.ID) {
			t.Fatalf("company %d's sealed key after a failed rotation: %q (%v)", c.ID, got.APIKeySealed, err)
		}
	}

	var gotOld, gotFresh map[string][]byte
	var seen [][]byte
	replaced, resealed, unopened, err := s.RotateSecrets(names, func(old, fresh map[string][]byte, sealed []byte) ([]byte, error) {
		gotOld, gotFresh = old, fresh
		seen = append(seen, sealed)
		return append([]byte("new-"), sealed...), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(replaced) != "[jwt seal]" || resealed != 2 || len(seen) != 2 || len(unopened) != 0 {
		t.Fatalf("rotated %v, re-sealed %d (%d calls), want [jwt seal] and 2", replaced, resealed, len(seen))
	}
	for name, was := range map[string][]byte{"jwt": jwt, "seal": seal} {
		now, err := s.Secret(name, 99)
		if err != nil || len(now) != len(was) || bytes.Equal(now, was) {
			t.Fatalf("secret %s after rotation: %x (%v), want %d new bytes (was %x)", name, now, err, len(was), was)
		}
		if !bytes.Equal(gotOld[name], was) || !bytes.Equal(gotFresh[name], now) {
			t.Fatalf("reseal was given old %x fresh %x for %s, want %x and %x", gotOld[name], gotFresh[name], name, was, now)
		}
	}
	if got, err := s.Secret("kept", 8); err != nil || !bytes.Equal(got, kept) {
		t.Fatalf("a secret not named: %x (%v), want it kept", got, err)
	}
	if _, ok := gotOld["absent"]; ok {
		t.Fatal("reseal was given a secret the store did not hold")
	}
	if got, err := s.Secret("absent", 4); err != nil || len(got) != 4 {
		t.Fatalf("a secret not held before the rotation: %x (%v), want 4 bytes made at its first use", got, err)
	}
	for _, c := range []store.Company{a, b} {
		got, err := s.Company(c.ID)
		if err != nil || string(got.APIKeySealed) != fmt.Sprintf("new-sealed-%d", c.ID) {
			t.Fatalf("company %d's sealed key after rotation: %q (%v), want it re-sealed", c.ID, got.APIKeySealed, err)
		}
		if byHash, err := s.CompanyByAPIKeyHash(c.APIKeyHash); err != nil || byHash.ID != c.ID {
			t.Fatalf("company %d by its key's hash after rotation: %+v (%v)", c.ID, byHash, err)
		}
	}
	if got, err := s.Company(bare.ID); err != nil || len(got.APIKeySealed) != 0 {
		t.Fatalf("a company without a sealed key after rotation: %q (%v)", got.APIKeySealed, err)
	}

	// A sealed key that does not open (store.ErrSealedUnopened): kept as
	// it is, its company returned; the rotation goes on and the others are
	// re-sealed under the fresh bytes.
	seal, err = s.Secret("seal", 16)
	if err != nil {
		t.Fatal(err)
	}
	replaced, resealed, unopened, err = s.RotateSecrets([]string{"seal"}, func(old, fresh map[string][]byte, sealed []byte) ([]byte, error) {
		if string(sealed) == fmt.Sprintf("new-sealed-%d", a.ID) {
			return nil, fmt.Errorf("%w: garbage", store.ErrSealedUnopened)
		}
		return append([]byte("again-"), sealed...), nil
	})
	if err != nil {
		t.Fatalf("rotate with one sealed key that does not open: %v, want it to go on", err)
	}
	if fmt.Sprint(replaced) != "[seal]" || resealed != 1 || len(unopened) != 1 || unopened[0].ID != a.ID || unopened[0].Name != a.Name {
		t.Fatalf("rotated %v, re-sealed %d, unopened %+v, want [seal], 1 and company %d (%q)", replaced, resealed, unopened, a.ID, a.Name)
	}
	if now, err := s.Secret("seal", 16); err != nil || bytes.Equal(now, seal) {
		t.Fatalf("secret seal after a rotation with a sealed key that does not open: %x (%v), want it replaced", now, err)
	}
	if got, err := s.Company(a.ID); err != nil || string(got.APIKeySealed) != fmt.Sprintf("new-sealed-%d", a.ID) {
		t.Fatalf("company %d's sealed key that does not open: %q (%v), want it kept", a.ID, got.APIKeySealed, err)
	}
	if got, err := s.Company(b.ID); err != nil || string(got.APIKeySealed) != fmt.Sprintf("again-new-sealed-%d", b.ID) {
		t.Fatalf("company %d's sealed key beside one that does not open: %q (%v), want it re-sealed", b.ID, got.APIKeySealed, err)
	}

	// Nothing held of the names: nothing replaced, reseal never called.
	replaced, resealed, unopened, err = s.RotateSecrets([]string{"absent-too"}, func(_, _ map[string][]byte, _ []byte) ([]byte, error) {
		t.Error("reseal called with no secret replaced")
		return nil, nil
	})
	if err != nil || len(replaced) != 0 || resealed != 0 || len(unopened) != 0 {
		t.Fatalf("rotating no held secret: %v %d (%v)", replaced, resealed, err)
	}
}

// inviteBudget: an invitation counts against its company's daily storage
// budget; one over it is a *store.BudgetError and stores nothing; another
// company's budget is its own.
func inviteBudget(t *testing.T, s AccountsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	for range 2 {
		u := accountUser(a.ID, store.RoleMember, false)
		if _, err := s.InviteUser(&u, T0); err != nil {
			t.Fatal(err)
		}
	}
	u := accountUser(a.ID, store.RoleMember, false)
	_, err := s.InviteUser(&u, T0)
	var be *store.BudgetError
	if !errors.As(err, &be) || be.CompanyID != a.ID || be.Limit != InviteBudgetBytes {
		t.Fatalf("an invitation over the budget: %v, want a *BudgetError of company %d", err, a.ID)
	}
	if us, _ := s.CompanyUsers(a.ID); len(us) != 3 {
		t.Fatalf("company users: %d, want the admin and two invitees", len(us))
	}
	if _, err := s.InviteUser(&u, T0.Add(24*time.Hour)); err != nil {
		t.Fatalf("the next day's invitation: %v", err)
	}
	w := accountUser(b.ID, store.RoleMember, false)
	if _, err := s.InviteUser(&w, T0); err != nil {
		t.Fatalf("another company's invitation: %v", err)
	}
}
