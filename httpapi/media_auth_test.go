package httpapi_test

import (
	"net/http"
	"testing"
)

// TestUploadRefusalsNameTheirCause: an upload is refused 401 with the
// sentence of why no device sends it: a token the store does not know
// (or no longer knows: its device deleted), a credential that is no
// device token or none, and Authorization lines that differ, even where
// the first is empty and only the second names a device.
func TestUploadRefusalsNameTheirCause(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	phone := e.pairPhone(a.apiKey, "a-phone")
	gone := e.pairPhone(a.apiKey, "a-gone")
	e.want(e.do(call{method: "DELETE", path: "/device/delete/a-gone", token: a.apiKey}), http.StatusOK, "")
	const (
		unknown = "The device token is missing, invalid or revoked."
		other   = "This route needs Authorization: Bearer <device token>."
		two     = "The Authorization header is given more than once, with different values; send one credential."
	)
	upload := func(c call) resp {
		c.method, c.path, c.body = "POST", "/device/media?key=k-1/0", "\x89PNG"
		return e.do(c)
	}
	for _, c := range []struct {
		call    call
		message string
	}{
		{call{token: "dt_unknown"}, unknown},
		{call{token: gone.DeviceToken}, unknown},
		{call{token: a.apiKey}, other},
		{call{}, other},
		{call{header: map[string]string{"Authorization": "Basic " + phone.DeviceToken}}, other},
		{call{header: map[string]string{"Authorization": "Bearer"}}, other},
		{call{multi: map[string][]string{"Authorization": {"Bearer " + phone.DeviceToken, "Bearer dt_other"}}}, two},
		{call{multi: map[string][]string{"Authorization": {"", "Bearer " + phone.DeviceToken}}}, two},
	} {
		r := upload(c.call)
		e.want(r, http.StatusUnauthorized, "unauthorized")
		if r.str("message") != c.message {
			t.Errorf("upload with %+v: %s, want %q", c.call, r.Raw, c.message)
		}
	}
	e.want(upload(call{token: phone.DeviceToken}), http.StatusCreated, "")
}
