package account

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// CompanyInput is a company's profile as signup and updates take it.
type CompanyInput struct {
	Name, Phone, Address, City, State, Country string
}

// OwnerInput is a company's first admin, as a signup and CreateCompany take it.
type OwnerInput struct {
	FirstName, LastName, Email, Password, Phone string
}

// SignupInput is the body of a signup.
type SignupInput struct {
	Company CompanyInput
	Owner   OwnerInput
}

// Session is what login and refresh hand out.
type Session struct {
	AccessToken  string
	RefreshToken string
	ExpiresIn    int // seconds
	User         store.User
	// Device is a fresh device cookie's value for the login's client
	// (devices.go), set by Login only; no part of the answer's body.
	Device string
}

var errInvalidLogin = problem.New(problem.InvalidLogin, "The e-mail address or password is wrong.")

// SignupOpen says whether strangers may sign up a company (Config.SignupClosed).
func (s *Service) SignupOpen() bool { return !s.cfg.SignupClosed }

// CheckSignup is nil while sign-up is open, and otherwise the 403
// signup_closed that every sign-up answers: the API and the console ask it
// before they read a sign-up's input, so a closed server answers every
// sign-up alike, well-formed or not.
func (s *Service) CheckSignup() error {
	if s.cfg.SignupClosed {
		return problem.New(problem.SignupClosed, "Sign-up is closed on this server: its operator creates the companies, and a company's admin invites its users.")
	}
	return nil
}

// Signup creates a company and its unverified owner, and mails the
// verification link; while sign-up is closed it stores nothing and
// answers CheckSignup's error.
func (s *Service) Signup(ctx context.Context, in SignupInput) (store.Company, store.User, error) {
	if err := s.CheckSignup(); err != nil {
		return store.Company{}, store.User{}, err
	}
	var v check
	c := store.Company{
		Name:    v.required("company.name", in.Company.Name, maxTextLen),
		Phone:   v.phone("company.phone", in.Company.Phone, true, ""),
		Address: v.optional("company.address", in.Company.Address, maxTextLen),
		City:    v.optional("company.city", in.Company.City, maxTextLen),
		State:   v.optional("company.state", in.Company.State, maxTextLen),
		Country: v.country("company.country", in.Company.Country),
	}
	u := store.User{
		FirstName: v.required("owner.firstName", in.Owner.FirstName, maxNameLen),
		LastName:  v.required("owner.lastName", in.Owner.LastName, maxNameLen),
		Email:     v.email("owner.email", in.Owner.Email),
	}
	v.password("owner.password", in.Owner.Password, true)
	u.Phone = v.phone("owner.phone", in.Owner.Phone, false, "")
	if v.err != nil {
		return c, u, v.err
	}
	if _, err := s.createCompany(ctx, &c, &u, in.Owner.Password, false); err != nil {
		return c, u, err
	}
	if err := s.sendToken(ctx, u, tokenVerify, s.cfg.VerifyTTL, func(tok string) mail.Message {
		return mail.VerifyEmail(s.cfg.PublicURL, u.FirstName, c.Name, tok, s.cfg.VerifyTTL)
	}); err != nil {
		return c, u, err
	}
	return c, u, nil
}

// CreateCompany makes a company with a verified admin and returns its API key:
// the quickest start, for the admin command, whose flags name the fields of
// its errors. A name not given is taken from the e-mail address (nameFromEmail).
func (s *Service) CreateCompany(name string, admin OwnerInput) (store.Company, store.User, string, error) {
	c, u, err := CheckNewCompany(name, admin)
	if err != nil {
		return c, u, "", err
	}
	key, err := s.createCompany(context.Background(), &c, &u, admin.Password, true)
	return c, u, key, err
}

// CheckNewCompany checks what CreateCompany takes, without a store, and
// returns the company and admin it would make: the admin command refuses
// bad input before it opens (or creates) the store, so a refused command
// leaves no data behind.
func CheckNewCompany(name string, admin OwnerInput) (store.Company, store.User, error) {
	var v check
	c := store.Company{Name: v.required("company", name, maxTextLen)}
	u := store.User{Email: v.email("email", admin.Email), EmailVerified: true}
	first, last := nameFromEmail(u.Email)
	if strings.TrimSpace(admin.FirstName) != "" {
		first = admin.FirstName
	}
	if strings.TrimSpace(admin.LastName) != "" {
		last = admin.LastName
	}
	u.FirstName = v.required("first-name", first, maxNameLen)
	u.LastName = v.optional("last-name", last, maxNameLen)
	v.password("password", admin.Password, true)
	u.Phone = v.phone("phone", admin.Phone, false, "")
	return c, u, v.err
}

// nameFromEmail reads a person's name in an address's local part, for an
// admin created without one, so that the console greets a person rather
// than "Admin": ana.lima+sms@acme.example is Ana Lima, ops@acme.example Ops.
// A wrong guess is corrected with PATCH /users/me.
func nameFromEmail(email string) (first, last string) {
	local, _, _ := strings.Cut(strings.TrimSpace(email), "@")
	local, _, _ = strings.Cut(local, "+")
	words := strings.FieldsFunc(local, func(r rune) bool { return r == '.' || r == '_' || r == '-' })
	for i, w := range words {
		r, n := utf8.DecodeRuneInString(w)
		words[i] = string(unicode.ToUpper(r)) + w[n:]
	}
	if len(words) == 0 || utf8.RuneCountInString(local) > maxNameLen {
		return "Admin", ""
	}
	return words[0], strings.Join(words[1:], " ")
}

func (s *Service) createCompany(ctx context.Context, c *store.Company, u *store.User, password string, verified bool) (string, error) {
	hash, err := hashPassword(ctx, password, s.cfg.passwordCost())
	if err != nil {
		return "", err
	}
	now := s.now().UTC()
	key := newAPIKey()
	c.CreatedAt, c.APIKeyHash, c.APIKeySealed, c.APIKeyCreatedAt = now, tokenHash(key), s.sealer.seal(key), now
	u.PasswordHash, u.EmailVerified, u.CreatedAt = hash, verified, now
	if err := s.store.CreateCompany(c, u); err != nil {
		if errors.Is(err, store.ErrConflict) && s.addressClosing(u.Email) {
			return "", errAddressClosing
		}
		return "", mapStoreErr(err, "company")
	}
	s.log.Info("company created", "company_id", c.ID, "user_id", u.ID)
	return key, nil
}

// sendToken stores a one-time token for u and mails it.
func (s *Service) sendToken(ctx context.Context, u store.User, kind string, ttl time.Duration, msg func(token string) mail.Message) error {
	tok := randomToken(32)
	if err := s.store.PutOneTimeToken(tokenHash(tok), store.OneTimeToken{Kind: kind, UserID: u.ID, ExpiresAt: s.now().Add(ttl), Generation: u.TokenGeneration}); err != nil {
		return err
	}
	m := msg(tok)
	m.To = u.Email
	if err := s.mailer.Send(ctx, m); err != nil {
		return fmt.Errorf("account: mail %s token: %w", kind, err)
	}
	return nil
}

var errBadToken = problem.New(problem.InvalidToken, "The link is invalid, already used or expired. Ask for a new one.")

// VerifyEmail spends a verification token and marks the address verified.
func (s *Service) VerifyEmail(_ context.Context, token string) error {
	var v check
	if v.token("token", token); v.err != nil {
		return v.err
	}
	_, err := s.store.ConsumeOneTimeToken(tokenHash(token), []string{tokenVerify}, s.now(), false, func(u *store.User) error {
		u.EmailVerified = true
		return nil
	})
	return tokenErr(err)
}

func tokenErr(err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrTokenExpired) {
		return errBadToken
	}
	return err
}

// Login checks an e-mail and password. It costs one argon2id hash whether or
// not the address exists, so timing does not reveal accounts; an address
// that had its failed logins of the window (Config.LoginRate) is refused
// with rate_limited, its password unchecked, whether or not it exists,
// unless the login presents a valid device cookie of the address
// (WithDevice, devices.go).
func (s *Service) Login(ctx context.Context, email, password string) (Session, error) {
	u, device, err := s.checkLogin(ctx, email, password)
	if err != nil {
		return Session{}, err
	}
	refresh := "rt_" + randomToken(32)
	now := s.now()
	if err := s.store.StartRefreshFamily(tokenHash(refresh), store.RefreshToken{UserID: u.ID, Family: randomToken(12), ExpiresAt: now.Add(s.cfg.RefreshTTL), Generation: u.TokenGeneration}, now); err != nil {
		return Session{}, signInGone(err)
	}
	sess, err := s.session(u, refresh)
	if err != nil {
		return Session{}, err
	}
	sess.Device = device
	return sess, nil
}

// signInGone answers a sign-in whose user was removed (with its company:
// simrelay admin delete-company) after its password was checked, which the
// store refuses to open a session for (ErrNotFound), as a login of an
// unknown address is answered.
func signInGone(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errInvalidLogin
	}
	return err
}

// checkLogin is the password check of every sign-in, the API's and the
// console's alike. Its device is a fresh device cookie's value for the
// signed-in address (devices.go).
func (s *Service) checkLogin(ctx context.Context, email, password string) (u store.User, device string, err error) {
	var v check
	email = v.email("email", email)
	v.password("password", password, false)
	if v.err != nil {
		return store.User{}, "", v.err
	}
	digest := s.loginDigest(email)
	u, read, ok, err := s.checkTrusted(ctx, digest, email, password)
	if ok {
		if err != nil {
			return store.User{}, "", err
		}
		return u, s.issueDevice(digest, u), nil
	}
	// The try counts against the address before anything is looked up,
	// whether or not it has an account; one over its failed logins is
	// answered at once, without a hash (logins.go).
	key := loginKey(digest)
	share, refundShare := s.takeShare(ctx, key)
	if !share.Allowed {
		return store.User{}, "", s.errShareSpent(share)
	}
	tried, refundTry := s.takeLogin(key)
	if !tried.Allowed {
		refundShare()
		return store.User{}, "", s.errLoginsSpent(tried)
	}
	refund := func() { refundTry(); refundShare() }
	if read {
		// The cookie's check read the address's user already: a login
		// whose cookie is not trusted (a rotation's, a reset's, or one
		// past its failures) reads it once, as one without a cookie does.
		u, err = s.checkUserPassword(ctx, u, password, refund)
	} else {
		u, err = s.verifyPassword(ctx, email, password, refund)
	}
	if errors.Is(err, errInvalidLogin) && tried.Remaining == 0 && u.ID != 0 {
		s.log.Warn("failed logins: the account had its failed logins of the window; its logins are refused until the window ends, but from its owner's trusted devices",
			"user_id", u.ID, "limit", s.cfg.LoginRate.String(), "retry_after_s", tried.ResetSeconds())
	}
	if err != nil {
		return store.User{}, "", err
	}
	return u, s.issueDevice(digest, u), nil
}

// checkTrusted checks a login that presents a valid device cookie of the
// address (devices.go): counted in the cookie's window, not the address's
// nor the client's share, and never refused by them. ok is false for a
// login with no valid cookie, or one whose cookie had its failures of the
// window: it takes the untrusted path. The address's user is read before
// the cookie's signature can be checked (it signs the user's id and token
// generation); only a cookie issued for the address gets that far. read
// says that it was read (u: zero for none), so that the untrusted path
// checks the password against it without a second read.
func (s *Service) checkTrusted(ctx context.Context, digest []byte, email, password string) (u store.User, read, ok bool, err error) {
	b, ok := presentedDevice(ctx, digest, s.now())
	if !ok {
		return store.User{}, false, false, nil
	}
	u, err = s.store.UserByEmail(email)
	if errors.Is(err, store.ErrNotFound) {
		return store.User{}, true, false, nil
	}
	if err != nil {
		return store.User{}, false, true, err // the server's fault; nothing was counted
	}
	device, ok := s.trustedDevice(b, u)
	if !ok {
		return u, true, false, nil
	}
	tried, refund := s.takeDevice(device)
	if !tried.Allowed {
		return u, true, false, nil
	}
	u, err = s.checkUserPassword(ctx, u, password, refund)
	if errors.Is(err, errInvalidLogin) && tried.Remaining == 0 {
		s.log.Warn("failed logins: a device cookie of the account had its failed logins of the window; it counts as none until the window ends",
			"user_id", u.ID, "limit", deviceRate(s.cfg.LoginRate).String(), "retry_after_s", tried.ResetSeconds())
	}
	return u, true, true, err
}

// verifyPassword checks the password of a login already counted; refund
// takes the try back, for one that proved not to be a failure. A wrong
// password answers errInvalidLogin with the address's user (zero for
// none), for the log.
func (s *Service) verifyPassword(ctx context.Context, email, password string, refund func()) (store.User, error) {
	u, err := s.store.UserByEmail(email)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		refund() // the server's fault, not a failed login
		return store.User{}, err
	}
	return s.checkUserPassword(ctx, u, password, refund)
}

// checkUserPassword is verifyPassword's check of u (zero for no user).
func (s *Service) checkUserPassword(ctx context.Context, u store.User, password string, refund func()) (store.User, error) {
	hash := u.PasswordHash
	if hash == "" {
		hash = s.dummyHash
	}
	ok, err := checkPassword(ctx, hash, password)
	if err != nil {
		refund() // the server's fault, or a request that ended before its turn: no failed login
		return store.User{}, err
	}
	if !ok || u.ID == 0 || u.PasswordHash == "" {
		return u, errInvalidLogin
	}
	// A right password takes back its own try and nothing more: the
	// failures before it stay counted until their window ends, or a
	// guesser would get a fresh allowance each time the owner signs in.
	refund()
	if !u.EmailVerified {
		return store.User{}, problem.New(problem.EmailNotVerified, "Verify your e-mail address first: follow the link in the message we sent.")
	}
	return u, nil
}

func (s *Service) session(u store.User, refresh string) (Session, error) {
	access, err := s.issueAccess(u)
	if err != nil {
		return Session{}, err
	}
	return Session{AccessToken: access, RefreshToken: refresh, ExpiresIn: int(s.cfg.AccessTTL.Seconds()), User: u}, nil
}

// Refresh spends a refresh token for a new pair. A token used twice revokes its
// whole family: whoever holds a stolen copy and the owner are both signed out.
func (s *Service) Refresh(_ context.Context, token string) (Session, error) {
	if token == "" {
		return Session{}, problem.Invalid("refreshToken", "is required")
	}
	next := "rt_" + randomToken(32)
	now := s.now()
	old, err := s.store.RotateRefreshToken(tokenHash(token), tokenHash(next), now.Add(s.cfg.RefreshTTL), now)
	switch {
	case errors.Is(err, store.ErrTokenReused):
		s.log.Warn("refresh token reused: family revoked", "user_id", old.UserID)
		return Session{}, problem.New(problem.Unauthorized, "This refresh token was already used; every session of its login is now signed out.")
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrTokenExpired), errors.Is(err, store.ErrTokenRevoked):
		return Session{}, problem.New(problem.Unauthorized, "The refresh token is invalid, expired or revoked. Log in again.")
	case err != nil:
		return Session{}, err
	}
	u, err := s.store.User(old.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return Session{}, problem.New(problem.Unauthorized, "The user no longer exists.")
	}
	if err != nil {
		return Session{}, err
	}
	if old.Generation != u.TokenGeneration {
		// The login checked a password that a reset has replaced since: it
		// raced the reset and started its family after the revocation.
		return Session{}, problem.New(problem.Unauthorized, "The refresh token is invalid, expired or revoked. Log in again.")
	}
	return s.session(u, next)
}

// ForgotPassword mails a reset link when the address belongs to a user, and
// answers the same either way, also once the account had its
// ResetMailsPerHour.
func (s *Service) ForgotPassword(ctx context.Context, email string) error {
	email, err := validEmail("email", email)
	if err != nil {
		return err
	}
	u, err := s.store.UserByEmail(email)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !s.resetAllowed(u.ID) {
		s.log.Warn("reset mail not sent: the account had its reset mails of the hour", "user_id", u.ID, "limit", ResetMailsPerHour)
		return nil
	}
	err = s.sendToken(ctx, u, tokenReset, s.cfg.ResetTTL, func(tok string) mail.Message {
		return mail.ResetPassword(s.cfg.PublicURL, u.FirstName, tok, s.cfg.ResetTTL)
	})
	if errors.Is(err, store.ErrNotFound) {
		// The user was removed (with the company) since it was read: as
		// for an address of no account, nothing is mailed.
		return nil
	}
	return err
}

// ResetPassword spends a reset or invite token, sets the password and signs
// out every session of the user: refresh tokens, console sessions and the
// access tokens issued before it; its device cookies are void too (their
// signature covers TokenGeneration, devices.go). Following an e-mailed link proves the
// address, so it also marks the e-mail verified.
func (s *Service) ResetPassword(ctx context.Context, token, password string) error {
	var v check
	v.token("token", token)
	v.password("password", password, false)
	if v.err != nil {
		return v.err
	}
	hash, err := hashPassword(ctx, password, s.cfg.passwordCost())
	if err != nil {
		return err
	}
	email := ""
	_, err = s.store.ConsumeOneTimeToken(tokenHash(token), []string{tokenReset, tokenInvite}, s.now(), true, func(u *store.User) error {
		email = u.Email
		u.PasswordHash = hash
		u.EmailVerified = true
		// Access tokens cannot be listed and revoked one by one, so every
		// one issued before now is refused from here (Authenticate).
		u.TokenGeneration++
		return nil
	})
	if errors.Is(err, store.ErrConflict) {
		// An invitee whose address got an account elsewhere since the
		// invitation, or has one still in a company being closed (the
		// link is not spent: followed again once the address is free, it
		// works).
		if s.addressClosing(email) {
			return errInviteAddressClosing
		}
		return errAddressTaken
	}
	return tokenErr(err)
}

// errAddressTaken answers only the owner of the mailbox (the invitation link
// came there), so it may say that the address has an account.
var errAddressTaken = problem.New(problem.Conflict, "This e-mail address already has a simrelay account, and an address can belong to one company only. Sign in with it, or ask to be invited at another address.")

// errAddressClosing answers a new account (a sign-up, the admin command's
// company) whose address still belongs to a user of a company being
// closed: the address is free once the removal's first step took it
// (account/close.go), within a minute or so, or longer while that step
// fails and waits for its next try. No one can sign in with the old
// account meanwhile, so the answer does not say to. It tells no more
// than the 409 of an address in use would (the contract keeps that one).
var errAddressClosing = problem.New(problem.Conflict, "This e-mail address belongs to an account of a company being closed. The address is free once the closing ends, usually within minutes: try again then.")

// errInviteAddressClosing is errAddressClosing for an invitation's link,
// which stays valid until it expires.
var errInviteAddressClosing = problem.New(problem.Conflict, "This e-mail address still belongs to an account of a company being closed. The address is free once the closing ends, usually within minutes: follow this link again then (it stays valid until it expires).")

// addressClosing says whether an address the store refused as held
// (ErrConflict) finds no account: its holder's company is closing (the
// store finds no user of such a company by address, store.Backend's
// UserByEmail) or was removed just now. A fault of the read says no.
func (s *Service) addressClosing(email string) bool {
	if email == "" {
		return false
	}
	_, err := s.store.UserByEmail(email)
	return errors.Is(err, store.ErrNotFound)
}
