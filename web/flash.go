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
// banner. The key is random per process: a restart only drops a banner.
type flashSigner struct{ key []byte }

func newFlashSigner() (*flashSigner, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("web: flash key: %w", err)
	}
	return &flashSigner{key: key}, nil
}

// sign is the sig parameter of a flash of kind "ok" or "err".
func (f *flashSigner) sign(kind, msg, field string) string {
	m := hmac.New(sha256.New, f.key)
	m.Write([]byte(kind + "\x00" + msg + "\x00" + field))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// notice adds a signed notice to a redirect address.
func (f *flashSigner) notice(to, msg string) string {
	return withQuery(withQuery(to, "ok", msg), "sig", f.sign("ok", msg, ""))
}

// failure adds a signed error, and the field it names, to a redirect address.
func (f *flashSigner) failure(to, msg, field string) string {
	to = withQuery(to, "err", msg)
	if field != "" {
		to = withQuery(to, "field", field)
	}
	return withQuery(to, "sig", f.sign("err", msg, field))
}

// from reads a page's flash from its address; an unsigned or altered one is
// ignored.
func (f *flashSigner) from(r *http.Request) Flash {
	q := r.URL.Query()
	sig := q.Get("sig")
	if m := q.Get("ok"); m != "" {
		if hmac.Equal([]byte(sig), []byte(f.sign("ok", m, ""))) {
			return Flash{Message: m, OK: true}
		}
		return Flash{}
	}
	m, field := q.Get("err"), q.Get("field")
	if m == "" || !hmac.Equal([]byte(sig), []byte(f.sign("err", m, field))) {
		return Flash{}
	}
	return Flash{Message: m, Field: field}
}
