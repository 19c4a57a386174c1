package account

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/simrelay/simrelay/internal/logspacing"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Lifetimes of credentials, as the contract sets them.
const (
	DefaultAccessTTL  = 15 * time.Minute    // short, because an access token cannot be revoked
	DefaultRefreshTTL = 30 * 24 * time.Hour // a month of staying signed in on a device
	DefaultVerifyTTL  = 24 * time.Hour
	DefaultResetTTL   = time.Hour
	// DefaultInviteTTL is longer than a reset: an invitee may not read mail within the hour.
	DefaultInviteTTL = 7 * 24 * time.Hour
)

// ResetMailsPerHour bounds the reset mails one account gets. The credential
// routes are limited per client address only, and addresses are cheap (an
// IPv6 /48 holds 65,536 clients of the limits): without it, anyone could have
// the server send a victim's mailbox, and its own outbox, mail without end.
// A request over it is answered as any other and sends nothing, so the
// answer still does not tell whether the address has an account.
const ResetMailsPerHour = 5

// Kinds of e-mailed one-time tokens.
const (
	tokenVerify = "verify"
	tokenReset  = "reset"
	tokenInvite = "invite"
)

// Config tunes the service.
type Config struct {
	// PublicURL is the server's address as users reach it, used in e-mailed links.
	PublicURL  string
	AccessTTL  time.Duration
	RefreshTTL time.Duration
	VerifyTTL  time.Duration
	ResetTTL   time.Duration
	InviteTTL  time.Duration
	// ConsoleIdle and ConsoleLifetime end web console sessions (console.go).
	ConsoleIdle     time.Duration
	ConsoleLifetime time.Duration
	// PasswordTime and PasswordMemory (KiB) are the argon2id cost of new
	// password hashes; zero means DefaultPasswordTime and DefaultPasswordMemory
	// (in a test build, TestCostBuild, the tests' cost instead).
	// A hash keeps its cost in its PHC string, so hashes of any cost verify.
	// The server keeps the defaults (no flag changes them); tests lower them,
	// since under the race detector one default hash takes about a second of CPU.
	PasswordTime   uint32
	PasswordMemory uint32
	// LoginRate bounds the failed logins of one e-mail address (logins.go);
	// the zero Rate means DefaultLoginRate.
	LoginRate pacing.Rate
	// MaxLoginAddresses bounds the e-mail addresses whose failed logins one
	// node keeps in memory; zero means pacing.DefaultMaxKeys. Beyond it,
	// addresses not yet counted share one window (pacing.NewCapped).
	MaxLoginAddresses int
	// SignupClosed refuses every public sign-up (POST /auth/signup, the
	// console's sign-up form) with 403 signup_closed, before its input is
	// read (serve --signup closed). Companies are then made by the
	// operator (CreateCompany, simrelay admin create-company), and
	// invitations to a company work as before.
	SignupClosed bool
}

func (c *Config) defaults() {
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.AccessTTL, DefaultAccessTTL}, {&c.RefreshTTL, DefaultRefreshTTL}, {&c.VerifyTTL, DefaultVerifyTTL}, {&c.ResetTTL, DefaultResetTTL}, {&c.InviteTTL, DefaultInviteTTL}, {&c.ConsoleIdle, DefaultConsoleIdle}, {&c.ConsoleLifetime, DefaultConsoleLifetime}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if c.PasswordTime == 0 {
		c.PasswordTime = buildPasswordTime // DefaultPasswordTime but in a test build (TestCostBuild)
	}
	if c.PasswordMemory == 0 {
		c.PasswordMemory = buildPasswordMemory
	}
	if c.LoginRate == (pacing.Rate{}) {
		c.LoginRate = DefaultLoginRate
	}
	if c.MaxLoginAddresses <= 0 {
		c.MaxLoginAddresses = pacing.DefaultMaxKeys
	}
}

// passwordCost is the argon2id cost of the hashes the service makes.
func (c *Config) passwordCost() argonCost {
	return argonCost{time: c.PasswordTime, memory: c.PasswordMemory}
}

// Mailer sends e-mail durably (mail.Service).
type Mailer interface {
	Send(ctx context.Context, m mail.Message) error
}

// Service is the account domain.
type Service struct {
	cfg       Config
	store     Store
	mailer    Mailer
	log       *slog.Logger
	now       func() time.Time
	jwtKey    []byte
	sealer    *sealer
	dummyHash string // verified against when a login names no known user, to keep timing even
	// keys caches API key hash -> cachedKey. On one node this process is the
	// store's only writer and RotateAPIKey clears it, so a rotated key stops
	// at once. In a cluster a rotation on another node clears it through the
	// bus before that node answers (SetPeers, cluster.go), and keyTTL bounds
	// what a node that missed the signal keeps.
	keys sync.Map
	// keysGen moves on every rotation; a lookup caches its answer only if no
	// rotation happened while it read the store, so it cannot revive a dead key.
	keysGen atomic.Uint64
	// resetMails counts each account's reset mails (ResetMailsPerHour) in
	// this process: on one node, and on a node of a cluster while
	// sharedResets does not answer.
	resetMails *pacing.Windows
	// sharedResets counts them for the whole cluster (ShareResetMails);
	// nil on one node.
	sharedResets ResetWindows
	// invites counts each company's invitations (InvitesPerDay) in this
	// process, as resetMails counts reset mails; sharedInvites for the
	// whole cluster (ShareInvites), nil on one node.
	invites       *pacing.Windows
	sharedInvites InviteWindows
	// failedLogins counts each e-mail address's failed logins (LoginRate),
	// clientShares each client's share of them (ClientShare, logins.go),
	// deviceFailures each trusted device cookie's (devices.go): in this
	// process's memory on one node, for the whole cluster in a cluster
	// (ShareFailedLogins). loginSecret keys their keys (loginKey, windowKey);
	// deviceSecret signs the cookies.
	failedLogins   loginCount
	clientShares   loginCount
	deviceFailures loginCount
	loginSecret    []byte
	loginsLog      logspacing.Spacer // spaces the lines of a failing shared count
	deviceSecret   []byte
	// closing wakes RunClosings when CloseCompany marked a company
	// closing.
	closing chan struct{}
	// retries are the closing companies whose last try at their removal
	// failed here, closingFailures how many tries failed since the start
	// (RunClosings), under retryMu.
	retryMu         sync.Mutex
	retries         map[uint64]closingRetry
	closingFailures int64
	// removed is told of each company whose removal ended here
	// (OnRemoved); nil: nobody.
	removed func(companyID uint64)
	// peers and keyTTL are set by SetPeers before serving; nil and 0 on one node.
	peers  Peers
	keyTTL time.Duration
}

// cachedKey is a cached API key's company, and when it was read.
type cachedKey struct {
	company uint64
	read    time.Time
}

// New returns the service; the server secrets are created in the store on first use.
func New(cfg Config, st Store, mailer Mailer, log *slog.Logger, now func() time.Time) (*Service, error) {
	cfg.defaults()
	jwtKey, err := st.Secret(JWTSecret, 32)
	if err != nil {
		return nil, err
	}
	sealKey, err := st.Secret(SealSecret, 32)
	if err != nil {
		return nil, err
	}
	sl, err := newSealer(sealKey)
	if err != nil {
		return nil, err
	}
	if err := cfg.LoginRate.Validate(); err != nil {
		return nil, fmt.Errorf("account: failed logins: %w", err)
	}
	loginSecret, err := st.Secret(LoginSecret, 32)
	if err != nil {
		return nil, err
	}
	deviceSecret, err := st.Secret(DeviceSecret, 32)
	if err != nil {
		return nil, err
	}
	dummy, err := hashPassword(context.Background(), randomToken(16), cfg.passwordCost())
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, store: st, mailer: mailer, log: log, now: now, jwtKey: jwtKey, sealer: sl, dummyHash: dummy,
		closing:        make(chan struct{}, 1),
		resetMails:     pacing.New(ResetRate(), now),
		invites:        pacing.New(InviteRate(), now),
		failedLogins:   loginCount{name: "e-mail address", local: pacing.NewCapped(cfg.LoginRate, now, cfg.MaxLoginAddresses)},
		clientShares:   loginCount{name: "client share", local: pacing.NewCapped(clientShareRate(cfg.LoginRate), now, cfg.MaxLoginAddresses)},
		deviceFailures: loginCount{name: "device cookie", local: pacing.NewCapped(deviceRate(cfg.LoginRate), now, cfg.MaxLoginAddresses)},
		loginSecret:    loginSecret, deviceSecret: deviceSecret}, nil
}

// Principal is who a request acts as.
type Principal struct {
	CompanyID uint64
	// UserID is zero for API-key requests, which act as an admin of their company.
	UserID    uint64
	Role      string
	ViaAPIKey bool
}

// IsAdmin reports whether the principal may use admin-only operations.
func (p Principal) IsAdmin() bool { return p.Role == store.RoleAdmin }

// Identity is the principal's rate-limit key.
func (p Principal) Identity() string {
	if p.ViaAPIKey {
		return "company:" + strconv.FormatUint(p.CompanyID, 10)
	}
	return "user:" + strconv.FormatUint(p.UserID, 10)
}

type accessClaims struct {
	CompanyID uint64 `json:"cid"`
	Role      string `json:"role"`
	// Generation is the user's TokenGeneration at issue; a token issued
	// before a password reset no longer matches it.
	Generation uint64 `json:"gen,omitempty"`
	jwt.RegisteredClaims
}

var errBadCredential = problem.New(problem.Unauthorized, "The API key or access token is missing, invalid or expired.")

// Authenticate resolves a bearer token: an API key (sk_...) or an access token.
// The role comes from the store, not the token, so a demotion or removal takes
// effect at once, and a token issued before the user's latest password reset
// is refused (TokenGeneration).
func (s *Service) Authenticate(ctx context.Context, token string) (Principal, error) {
	return s.authenticate(token, true)
}

// Reauthenticate checks again the credential of a request that
// Authenticate let in and that runs on, for hours maybe (a company export
// streaming to a slow client): as Authenticate, except that an access
// token that has expired since is still its user's. Its user, company,
// role and token generation are read again, so a removal, a demotion or a
// sign-out everywhere ends it at once, as a rotation ends an API key; its
// expiry ends no request already let in.
func (s *Service) Reauthenticate(_ context.Context, token string) (Principal, error) {
	return s.authenticate(token, false)
}

// authenticate is Authenticate, holding an access token to its expiry
// only with expiry.
func (s *Service) authenticate(token string, expiry bool) (Principal, error) {
	if token == "" {
		return Principal{}, errBadCredential
	}
	if strings.HasPrefix(token, APIKeyPrefix) {
		sum := sumToken(token)
		if v, ok := s.keys.Load(string(sum[:])); ok {
			k := v.(cachedKey)
			if s.keyTTL <= 0 || s.now().Sub(k.read) < s.keyTTL {
				return Principal{CompanyID: k.company, Role: store.RoleAdmin, ViaAPIKey: true}, nil
			}
		}
		hash := append([]byte(nil), sum[:]...) // for the store: sum stays on the stack
		gen := s.keysGen.Load()
		c, err := s.store.CompanyByAPIKeyHash(hash)
		if errors.Is(err, store.ErrNotFound) {
			return Principal{}, errBadCredential
		}
		if err != nil {
			return Principal{}, err
		}
		if s.keysGen.Load() == gen {
			s.keys.Store(string(hash), cachedKey{company: c.ID, read: s.now()})
			if s.keysGen.Load() != gen { // a rotation raced the store: forget it
				s.keys.Delete(string(hash))
			}
		}
		return Principal{CompanyID: c.ID, Role: store.RoleAdmin, ViaAPIKey: true}, nil
	}
	var claims accessClaims
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()})}
	if expiry {
		opts = append(opts, jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(s.now))
	} else {
		opts = append(opts, jwt.WithoutClaimsValidation()) // the signature still holds
	}
	_, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return s.jwtKey, nil }, opts...)
	if err != nil {
		return Principal{}, errBadCredential
	}
	uid, err := strconv.ParseUint(claims.Subject, 10, 64)
	if err != nil {
		return Principal{}, errBadCredential
	}
	u, err := s.store.User(uid)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, errBadCredential
	}
	if err != nil {
		return Principal{}, err
	}
	if u.CompanyID != claims.CompanyID || u.TokenGeneration != claims.Generation {
		return Principal{}, errBadCredential
	}
	return Principal{CompanyID: u.CompanyID, UserID: u.ID, Role: u.Role}, nil
}

func (s *Service) issueAccess(u store.User) (string, error) {
	now := s.now()
	claims := accessClaims{
		CompanyID:  u.CompanyID,
		Role:       u.Role,
		Generation: u.TokenGeneration,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   strconv.FormatUint(u.ID, 10),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(s.cfg.AccessTTL)),
			ID:        randomToken(12),
		},
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.jwtKey)
	if err != nil {
		return "", fmt.Errorf("account: sign access token: %w", err)
	}
	return tok, nil
}

// EmailTaken is the message of the 409 conflict for an address that
// already has a user: the console shows it beside the e-mail field.
const EmailTaken = "A user with this e-mail address already exists."

// mapStoreErr turns store sentinels into the catalog; what is left is a server fault.
func mapStoreErr(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return problem.Newf(problem.NotFound, "No such %s.", what)
	case errors.Is(err, store.ErrLastAdmin):
		return problem.New(problem.Conflict, "The company must keep at least one admin.")
	case errors.Is(err, store.ErrConflict):
		return problem.New(problem.Conflict, EmailTaken)
	case errors.Is(err, store.ErrTooManyUsers):
		return problem.Newf(problem.Conflict, "A company may have at most %d users, invitations not yet accepted included; remove one first.", store.MaxUsers)
	}
	return err
}
