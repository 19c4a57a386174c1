package device

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/linebreak"
	"github.com/simrelay/simrelay/internal/visible"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/phone"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// DefaultPairingTTL is how long a pairing code works: long enough to find the
// phone and scan, short enough that a code on a screenshot goes stale.
const DefaultPairingTTL = 10 * time.Minute

// pairingAlphabet is Crockford's base32: no I, L, O or U to misread when typed.
const pairingAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// pairingCodeLen gives 40 bits: with the auth rate limit (15 tries per 15
// minutes per IP) and a 10-minute life, guessing one is hopeless.
const pairingCodeLen = 8

// TokenPrefix starts every device token.
const TokenPrefix = "dt_"

// Config tunes the service.
type Config struct {
	// PublicURL is the server's address as phones reach it.
	PublicURL  string
	PairingTTL time.Duration
}

// Store is what the service needs of the store.
type Store interface {
	PutPairing(hash []byte, p store.Pairing, now time.Time) error
	Pairing(hash []byte) (store.Pairing, error)
	RegisterDevice(pairingHash []byte, now time.Time, fingerprint string, build func(p store.Pairing, old *store.Device) (store.Device, error)) (store.Device, bool, store.DeviceSummary, error)
	CompanyDevice(companyID uint64, fingerprint string) (store.Device, error)
	DeviceByTokenHash(hash []byte) (store.Device, error)
	CompanyDevices(companyID uint64) ([]store.Device, error)
	DevicesReportedOnline() ([]store.Device, error)
	UpdateDevice(companyID uint64, fingerprint string, fn func(*store.Device) error) (store.Device, error)
	UpdateDeviceByID(companyID, deviceID uint64, fn func(*store.Device) error) (store.Device, error)
	UpdateDeviceWith(companyID, deviceID uint64, fn func(d *store.Device) ([]store.DeviceEvent, error)) (store.Device, error)
	DeviceSummaries(companyID uint64, deviceIDs []uint64) (map[uint64]store.DeviceSummary, error)
	DeleteDevice(companyID uint64, fingerprint string, now time.Time) (store.Device, error)
	ProvisionDevices(devs []store.Device) error
	CompanyUsers(companyID uint64) ([]store.User, error)
}

// Service is the device domain.
type Service struct {
	cfg    Config
	store  Store
	now    func() time.Time
	alerts Alerts // zero: no device events, no mail (alerts.go); set before serving
	// deleted is told of each device deleted, after the delete committed
	// (OnDelete); nil: nobody.
	deleted func(store.Device)
	// offlineMails counts each company's offline mails
	// (OfflineMailsPerHour) in this process: on one node, and on a node of
	// a cluster while sharedOffline does not answer; sharedOffline counts
	// them for the whole cluster (ShareOfflineMails), nil on one node.
	offlineMails  *pacing.Windows
	sharedOffline OfflineWindows
}

// OnDelete sets what is told of each device deleted, once the delete is
// stored (the agent channels release the jobs it was handed: channel
// Service.Released); call it before serving.
func (s *Service) OnDelete(fn func(store.Device)) { s.deleted = fn }

// New returns the service.
func New(cfg Config, st Store, now func() time.Time) *Service {
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if cfg.PairingTTL <= 0 {
		cfg.PairingTTL = DefaultPairingTTL
	}
	return &Service{cfg: cfg, store: st, now: now, offlineMails: pacing.New(OfflineMailRate(), now)}
}

// Pairing is a fresh pairing code.
type Pairing struct {
	Code      string
	URI       string
	ExpiresAt time.Time
}

// CreatePairing makes a single-use code that joins a phone to the company.
// The device will belong to the user who made the code; for the API key,
// to the company's first admin.
func (s *Service) CreatePairing(_ context.Context, companyID, userID uint64) (Pairing, error) {
	viaKey := userID == 0
	if viaKey {
		users, err := s.store.CompanyUsers(companyID)
		if err != nil {
			return Pairing{}, err
		}
		for _, u := range users {
			if u.Role == store.RoleAdmin {
				userID = u.ID
				break
			}
		}
	}
	code := randomCode()
	p := Pairing{Code: code, URI: s.pairingURI(code), ExpiresAt: s.now().Add(s.cfg.PairingTTL).UTC()}
	if err := s.store.PutPairing(codeHash(code), store.Pairing{CompanyID: companyID, UserID: userID, ViaAPIKey: viaKey, ExpiresAt: p.ExpiresAt}, s.now()); err != nil {
		return Pairing{}, err
	}
	return p, nil
}

// PairingURI returns the URI of a live code of the company, for its QR image;
// another company's, a used or an expired code is not found.
func (s *Service) PairingURI(_ context.Context, companyID uint64, code string) (string, error) {
	code = normaliseCode(code)
	p, err := s.store.Pairing(codeHash(code))
	if err != nil || p.CompanyID != companyID || !p.UsedAt.IsZero() || !s.now().Before(p.ExpiresAt) {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		return "", problem.New(problem.NotFound, "No such pairing code, or it was used or expired.")
	}
	return s.pairingURI(code), nil
}

// pairingURI is what the QR code holds: the server to talk to and the code.
func (s *Service) pairingURI(code string) string {
	return "simrelay://pair?server=" + url.QueryEscape(s.cfg.PublicURL) + "&code=" + code
}

// WebSocketURL is where registered phones connect.
func (s *Service) WebSocketURL() string {
	u := s.cfg.PublicURL
	switch {
	case strings.HasPrefix(u, "https://"):
		u = "wss://" + strings.TrimPrefix(u, "https://")
	case strings.HasPrefix(u, "http://"):
		u = "ws://" + strings.TrimPrefix(u, "http://")
	}
	return u + "/device/ws"
}

func randomCode() string {
	b := make([]byte, pairingCodeLen)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("device: crypto/rand failed: %v", err))
	}
	for i := range b {
		b[i] = pairingAlphabet[int(b[i])%len(pairingAlphabet)] // 256 is a multiple of 32: no bias
	}
	return string(b)
}

// normaliseCode lets people type a code in any case, with spaces or dashes.
func normaliseCode(code string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == ' ' || r == '-':
			return -1
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		}
		return r
	}, code)
}

func codeHash(code string) []byte { h := sha256.Sum256([]byte("pairing:" + code)); return h[:] }

func tokenHash(tok string) []byte { h := sha256.Sum256([]byte(tok)); return h[:] }

func newToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("device: crypto/rand failed: %v", err))
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// RegisterInput is what a phone sends with its pairing code.
type RegisterInput struct {
	PairingCode       string
	DeviceFingerprint string
	DeviceName        string
	SIMs              []store.SIM
	FCMToken          string
	AppVersion        string
}

var fingerprintRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// checkFingerprint is the rule of a new device's fingerprint: the pattern,
// and neither "." nor "..". Those two match it, but as a path segment they
// are dot segments, which every URL is cleaned of before routing (a 308 to
// the path without them), so no address could name the device: it could
// not be renamed, disabled, capped or deleted, through the API or the
// console, and took a place of the plan's device limit for good.
func checkFingerprint(field, fp string) error {
	if !fingerprintRE.MatchString(fp) {
		return problem.Invalid(field, "must be 1 to 128 letters, digits, dots, dashes, underscores or colons")
	}
	if fp == "." || fp == ".." {
		return problem.Invalid(field, "must not be . or ..: no address could name the device (a path is cleaned of such segments)")
	}
	return nil
}

// IsFingerprint reports whether fp can name a device: the pattern of
// checkFingerprint. "." and ".." pass, as a device registered with one
// before they were refused is still named so (a webhook's devices scope
// may name it).
func IsFingerprint(fp string) bool { return fingerprintRE.MatchString(fp) }

// CheckFingerprint holds fp to the rule Register holds a new device's
// fingerprint to, naming field in its refusal: a client checks it before it
// makes a pairing code that the registration would then refuse.
func CheckFingerprint(field, fp string) error { return checkFingerprint(field, fp) }

// CheckName holds a device name a person gives (a rename, the virtual
// phone's --name) to its rules, naming field in its refusal: 1 to 100 bytes
// of UTF-8 once trimmed of spaces (the register frame's bound), no line
// break or other control character, and a visible character. A person's
// name is refused where the phone's own name at registration is mended
// (Register): the person can retype it.
func CheckName(field, name string) error {
	n := strings.TrimSpace(name)
	if n == "" || len(n) > 100 || !utf8.ValidString(n) {
		return problem.Invalid(field, "must be 1 to 100 bytes of UTF-8")
	}
	if fault := linebreak.Fault(n); fault != "" {
		return problem.Invalid(field, fault)
	}
	if visible.None(n) {
		return problem.Invalid(field, visible.FaultMessage)
	}
	return nil
}

// Registered is a phone's registration as Register made it.
type Registered struct {
	Device store.Device
	// Token is the device's new token, handed to the phone only.
	Token string
	// Replaced reports that the device was registered before: its old
	// token is dead, and a live link on it must be closed.
	Replaced bool
	// Summary is the device's queue and last failures as the registration
	// left them, read in its transaction (none for a new device): the
	// answer is made of what the commit returned, so that no read after it,
	// which may fail, answers a fault for a registration that was made,
	// its pairing code spent.
	Summary store.DeviceSummary
}

// Register spends a pairing code and hands the phone its token.
func (s *Service) Register(_ context.Context, in RegisterInput) (reg Registered, err error) {
	in.PairingCode = normaliseCode(in.PairingCode)
	if in.PairingCode == "" {
		return reg, problem.Invalid("pairing_code", "is required")
	}
	if err := checkFingerprint("device_fingerprint", in.DeviceFingerprint); err != nil {
		return reg, err
	}
	// The phone names itself (its model, or what its user called it): a line
	// break or another control character in it is mended to a space, not
	// refused, so that no phone fails its pairing over its own name
	// (linebreak; PROTOCOL.md). A person renaming it is refused (Update).
	name := strings.TrimSpace(linebreak.Replace(in.DeviceName))
	if len(name) > 100 {
		return reg, problem.Invalid("device_name", "must be at most 100 bytes of UTF-8")
	}
	if visible.None(name) {
		name = "Android phone"
	}
	sims, err := validSIMs(in.SIMs)
	if err != nil {
		return reg, err
	}
	if len(in.FCMToken) > 4096 {
		return reg, problem.Invalid("fcm_token", "must be at most 4096 bytes")
	}
	in.AppVersion = linebreak.Replace(in.AppVersion)
	if len(in.AppVersion) > 64 {
		return reg, problem.Invalid("app_version", "must be at most 64 bytes")
	}
	token := newToken()
	now := s.now().UTC()
	dev, replaced, sum, err := s.store.RegisterDevice(codeHash(in.PairingCode), now, in.DeviceFingerprint, func(p store.Pairing, old *store.Device) (store.Device, error) {
		d := store.Device{UserID: p.UserID, Name: name, Status: store.DeviceActive, SelectedSIM: proto.BothSIMs, SIMs: sims,
			FCMToken: in.FCMToken, AppVersion: in.AppVersion, TokenHash: tokenHash(token), CreatedAt: now}
		if old != nil {
			d.CreatedAt, d.SelectedSIM, d.Status, d.LastSeenAt, d.SMSPerMinute, d.Health = old.CreatedAt, old.SelectedSIM, old.Status, old.LastSeenAt, old.SMSPerMinute, old.Health
		}
		return d, nil
	})
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrPairingUsed), errors.Is(err, store.ErrTokenExpired):
		return reg, &problem.Error{Code: problem.InvalidToken, Field: "pairing_code", Message: "The pairing code is wrong, used or expired. Create a new one."}
	case errors.Is(err, store.ErrConflict):
		return reg, problem.New(problem.Conflict, "This device is registered to another company. Delete it there first.")
	case errors.As(err, new(*store.PlanLimitError)):
		var pl *store.PlanLimitError
		errors.As(err, &pl)
		return reg, &problem.Error{Code: problem.PlanLimitReached, HTTPStatus: http.StatusForbidden, Message: deviceLimitMessage(pl.Limit)}
	case err != nil:
		return reg, err
	}
	return Registered{Device: dev, Token: token, Replaced: replaced, Summary: sum}, nil
}

// deviceLimitMessage refuses a new device to a company whose plan allows
// limit devices, all of them registered.
func deviceLimitMessage(limit int64) string {
	if limit == 1 {
		return "The company's plan allows 1 device and it is registered; delete it or choose a larger plan."
	}
	return fmt.Sprintf("The company's plan allows %d devices and they are registered; delete one or choose a larger plan.", limit)
}

func validSIMs(in []store.SIM) ([]store.SIM, error) {
	if len(in) > 2 {
		return nil, problem.Invalid("sims", "must list at most two SIMs: a phone has no more slots")
	}
	out := make([]store.SIM, 0, len(in))
	seen := map[string]bool{}
	for i, sim := range in {
		field := fmt.Sprintf("sims[%d]", i)
		if !proto.IsSIMSlot(sim.Slot) {
			return nil, problem.Invalid(field+".slot", "must be SIM1 or SIM2")
		}
		if seen[sim.Slot] {
			return nil, problem.Invalid(field+".slot", "names a slot twice")
		}
		seen[sim.Slot] = true
		if sim.PhoneNumber != "" {
			n, err := phone.Normalize(sim.PhoneNumber)
			if err != nil {
				return nil, problem.Invalid(field+".phone_number", err.Error())
			}
			sim.PhoneNumber = n
		}
		// The phone reads the carrier's name off the network: mended, as
		// the device's name in Register is.
		sim.Carrier = linebreak.Replace(sim.Carrier)
		if len(sim.Carrier) > 64 {
			return nil, problem.Invalid(field+".carrier", "must be at most 64 bytes of UTF-8")
		}
		out = append(out, sim)
	}
	return out, nil
}

// Authenticate returns the device of a token; an unknown or revoked token is store.ErrNotFound.
func (s *Service) Authenticate(_ context.Context, token string) (store.Device, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		return store.Device{}, store.ErrNotFound
	}
	return s.store.DeviceByTokenHash(tokenHash(token))
}

// Provision creates many devices of the company at once, without pairing, and
// returns their tokens in order: for fleets set up ahead of time, and for the
// load harness.
func (s *Service) Provision(_ context.Context, companyID, userID uint64, fingerprints []string) ([]string, error) {
	now := s.now().UTC()
	tokens := make([]string, len(fingerprints))
	devs := make([]store.Device, len(fingerprints))
	for i, fp := range fingerprints {
		if err := checkFingerprint(fmt.Sprintf("fingerprints[%d]", i), fp); err != nil {
			return nil, err
		}
		tokens[i] = newToken()
		devs[i] = store.Device{Fingerprint: fp, CompanyID: companyID, UserID: userID, Name: fp, Status: store.DeviceActive,
			SelectedSIM: proto.BothSIMs, TokenHash: tokenHash(tokens[i]), CreatedAt: now}
	}
	if err := s.store.ProvisionDevices(devs); err != nil {
		return nil, err
	}
	return tokens, nil
}
