package account

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
)

// Device cookies, after OWASP's "Slow down online guessing attacks with
// device cookies". The failed logins' count of an e-mail address
// (logins.go) is spent by anyone: 4 client addresses failing 10 times a
// window keep the address's sign-ins refused, the owner's right password
// included. A successful login earns its browser or client a device
// cookie that names the account (the keyed digest of its e-mail address,
// loginKey), when it was issued, and a nonce, signed with the store's
// secret DeviceSecret over the user's id and token generation as well
// (deviceMAC), so that it is the trust of one user with one password. A
// later login of that address that presents a valid cookie for it is not
// counted by the address's count nor by the client's share, and is never
// refused by them: it has a failure count of
// its own, DeviceFailures a window, and past it the cookie counts as none
// until its window ends (the login takes the untrusted path, today's rules).
// A wrong password with a valid cookie counts against the cookie, not the
// address. So a guesser without the owner's cookie cannot keep the owner
// out, and a guesser with a stolen cookie gets DeviceFailures tries a
// window more (from the whole cluster: ShareFailedLogins).
//
// The cookie is stateless: nothing is stored per cookie, so it survives a
// restart, holds on every node of a cluster (the secret is the store's,
// one for all), and admin rotate-keys, which replaces the secret, voids
// every cookie issued before; a password set through an e-mailed link voids
// its user's, and a user's deletion theirs.

// DeviceSecret is the store secret that signs device cookies.
const DeviceSecret = "login-devices"

// DeviceCookie is the device cookie's name; over https it carries the
// __Host- prefix, as the console's cookies do (DeviceHTTPCookie).
const DeviceCookie = "simrelay_device"

// DeviceLifetime is how long a device cookie is valid after its issue:
// 180 days, as OWASP suggests, so that an owner who signs in every few
// months keeps a trusted device; each successful login issues a fresh one.
const DeviceLifetime = 180 * 24 * time.Hour

// DeviceFailures is how many failed logins a device cookie may count in a
// window of the address's (LoginRate's window): a half of LoginRate's 10,
// enough for an owner's typos and a password manager's retry, and what a
// stolen cookie adds to a guesser's tries.
const DeviceFailures = 5

// deviceClockSkew is how far in the future a cookie's issue time may be:
// nodes of a cluster whose clocks differ by a little take each other's.
const deviceClockSkew = 5 * time.Minute

// A cookie's value is unpadded base64url of: a version byte, the 16-byte
// keyed digest of the account's e-mail address, the issue time (Unix
// seconds, big-endian), a 12-byte nonce, and the first 16 bytes of the
// HMAC-SHA256 of all before under DeviceSecret.
const (
	deviceVersion  = 1
	deviceDigestAt = 1
	deviceIssuedAt = deviceDigestAt + loginDigestSize
	deviceNonceAt  = deviceIssuedAt + 8
	deviceMACAt    = deviceNonceAt + 12
	deviceSize     = deviceMACAt + 16
)

// deviceRate is a cookie's failures' window: DeviceFailures in the
// address's window.
func deviceRate(r pacing.Rate) pacing.Rate {
	return pacing.Rate{Limit: min(DeviceFailures, r.Limit), Window: r.Window}
}

type deviceCtx struct{}

// WithDevice is ctx carrying the device cookie a login presents (its
// value; "" for none), for Login and ConsoleSignIn.
func WithDevice(ctx context.Context, cookie string) context.Context {
	return context.WithValue(ctx, deviceCtx{}, cookie)
}

// issueDevice is a fresh device cookie's value for u, whose e-mail
// address's keyed digest is digest.
func (s *Service) issueDevice(digest []byte, u store.User) string {
	b := make([]byte, deviceSize)
	b[0] = deviceVersion
	copy(b[deviceDigestAt:], digest)
	binary.BigEndian.PutUint64(b[deviceIssuedAt:], uint64(s.now().Unix()))
	if _, err := rand.Read(b[deviceNonceAt:deviceMACAt]); err != nil {
		panic(fmt.Sprintf("account: crypto/rand failed: %v", err))
	}
	copy(b[deviceMACAt:], s.deviceMAC(b[:deviceMACAt], u))
	return base64.RawURLEncoding.EncodeToString(b)
}

// deviceMAC is the signature of a cookie's first bytes b for u: it signs
// the user's id and TokenGeneration too, which the cookie does not carry,
// so that a cookie is void once its user is deleted (an account made
// later with the address is another id) or its password set through an
// e-mailed link (ResetPassword moves TokenGeneration on).
func (s *Service) deviceMAC(b []byte, u store.User) []byte {
	m := hmac.New(sha256.New, s.deviceSecret)
	m.Write(b)
	var who [16]byte
	binary.BigEndian.PutUint64(who[:8], u.ID)
	binary.BigEndian.PutUint64(who[8:], u.TokenGeneration)
	m.Write(who[:])
	return m.Sum(nil)[:deviceSize-deviceMACAt]
}

// presentedDevice is the device cookie ctx carries, decoded, if it may be
// one of the e-mail address whose digest is digest: of this layout, issued
// for that address, less than DeviceLifetime ago. Its signature is checked
// by trustedDevice, against the address's user.
func presentedDevice(ctx context.Context, digest []byte, now time.Time) ([]byte, bool) {
	cookie, _ := ctx.Value(deviceCtx{}).(string)
	if cookie == "" || len(cookie) != base64.RawURLEncoding.EncodedLen(deviceSize) {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(cookie)
	if err != nil || len(b) != deviceSize || b[0] != deviceVersion || !hmac.Equal(b[deviceDigestAt:deviceIssuedAt], digest) {
		return nil, false
	}
	issued := time.Unix(int64(binary.BigEndian.Uint64(b[deviceIssuedAt:deviceNonceAt])), 0)
	if issued.After(now.Add(deviceClockSkew)) || !now.Before(issued.Add(DeviceLifetime)) {
		return nil, false
	}
	return b, true
}

// trustedDevice is the key of the failures' window of the device cookie b
// (presentedDevice; the key is a keyed digest of its nonce, windowKey), if
// it is signed with this store's secret for u, the
// user of its address now, as u stands now. Anything else (another
// account's, forged, tampered with, signed before a rotation of the
// secret, before u's password was reset, or for a user since deleted) is
// not trusted and the login takes the untrusted path.
func (s *Service) trustedDevice(b []byte, u store.User) (string, bool) {
	if u.ID == 0 || !hmac.Equal(b[deviceMACAt:], s.deviceMAC(b[:deviceMACAt], u)) {
		return "", false
	}
	return s.windowKey("device", b[deviceNonceAt:deviceMACAt]), true
}

// takeDevice counts a login try with a trusted device cookie (its key) in
// the cookie's window, and says whether it may be checked; refund takes
// it back (take).
func (s *Service) takeDevice(key string) (pacing.Result, func()) {
	return s.take(s.deviceFailures, key)
}

// PublicURLIsHTTPS says whether the server's public URL publicURL is
// https (the scheme in any case), which makes the cookies it sets Secure:
// the console's session and the device cookie alike.
func PublicURLIsHTTPS(publicURL string) bool {
	return strings.HasPrefix(strings.ToLower(publicURL), "https://")
}

// DeviceHTTPCookie is the Set-Cookie of a device cookie's value in answer
// to r, for the API's login and the console's sign-in alike: Path=/ so
// that both send it, HttpOnly (no script reads it), SameSite=Strict (no
// other site's page sends it), Max-Age DeviceLifetime; when the public URL
// publicURL is https, or r came over TLS, Secure and the __Host- prefix,
// so that only this host, over https, can set it.
func DeviceHTTPCookie(value, publicURL string, r *http.Request) *http.Cookie {
	secure := PublicURLIsHTTPS(publicURL) || r.TLS != nil
	name := DeviceCookie
	if secure {
		name = "__Host-" + name
	}
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: int(DeviceLifetime / time.Second),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}

// PresentedDevice is the device cookie's value r carries, under either
// name ("" for none): the __Host- one first.
func PresentedDevice(r *http.Request) string {
	for _, name := range []string{"__Host-" + DeviceCookie, DeviceCookie} {
		if c, err := r.Cookie(name); err == nil && c.Value != "" {
			return c.Value
		}
	}
	return ""
}
