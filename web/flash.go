package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
)

// flashSigner signs the notice or error a redirect carries in the address
// (?ok=, ?err=&field=) and the banner shows only a signed one. Without it a
// link from anywhere, /console/devices?err=Your+account+is+locked..., puts
// any sentence its author likes on the console's own page, in its own
// banner. The key is the server's, kept in the store (FlashSecret): every
// node of a cluster, which has no sticky sessions, reads what another
// signed, since the page a redirect leads to may be served by any of them,
// and so does the same server after a restart.
//
// A signature is bound to the browser it was made for: the CSRF token of
// its session, or before sign-in its pre-sign-in token. A notice may carry
// text a user chose (a device's name, a phone number), so a link made in
// one browser must show nothing in any other: not in another company's
// console, not to another member of the same company, not on the sign-in
// page of a stranger.
type flashSigner struct{ key []byte }

// FlashSecret names the flash key among the store's secrets (simrelay admin
// rotate-keys replaces it).
const FlashSecret = "console-flash"

// newFlashSigner takes its key from secrets, or, where there are none (a
// console built without a store to keep it), draws one for the process.
func newFlashSigner(secrets Secrets) (*flashSigner, error) {
	if secrets != nil {
		key, err := secrets.Secret(FlashSecret, 32)
		if err != nil {
			return nil, fmt.Errorf("web: flash key: %w", err)
		}
		return &flashSigner{key: key}, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("web: flash key: %w", err)
	}
	return &flashSigner{key: key}, nil
}

// sign is the sig parameter of a flash of kind "ok" or "err" for the
// browser whose token is bind.
func (f *flashSigner) sign(bind, kind, msg, field string) string {
	m := hmac.New(sha256.New, f.key)
	for _, part := range []string{bind, kind, msg, field} {
		// Length-prefixed, so no two different lists sign alike.
		fmt.Fprintf(m, "%d:%s", len(part), part)
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// notice adds a signed notice to a redirect address.
func (f *flashSigner) notice(to, bind, msg string) string {
	return withQuery(withQuery(to, "ok", msg), "sig", f.sign(bind, "ok", msg, ""))
}

// failure adds a signed error, and the field it names, to a redirect address.
func (f *flashSigner) failure(to, bind, msg, field string) string {
	to = withQuery(to, "err", msg)
	if field != "" {
		to = withQuery(to, "field", field)
	}
	return withQuery(to, "sig", f.sign(bind, "err", msg, field))
}

// from reads a page's flash from its address, for the browser whose token
// is bind; an unsigned or altered one, or one signed for another browser,
// is ignored.
func (f *flashSigner) from(r *http.Request, bind string) Flash {
	if bind == "" {
		return Flash{}
	}
	q := query(r)
	sig := q.Get("sig")
	if m := q.Get("ok"); m != "" {
		if hmac.Equal([]byte(sig), []byte(f.sign(bind, "ok", m, ""))) {
			return Flash{Message: m, OK: true}
		}
		return Flash{}
	}
	m, field := q.Get("err"), q.Get("field")
	if m == "" || !hmac.Equal([]byte(sig), []byte(f.sign(bind, "err", m, field))) {
		return Flash{}
	}
	return Flash{Message: m, Field: field}
}
