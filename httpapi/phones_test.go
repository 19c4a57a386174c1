package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"io"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/mail/mailtest"
)

// pairingCodeRE is eight characters of Crockford's base32 (no I, L, O or U).
var pairingCodeRE = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{8}$`)

// contractTime is the contract's timestamp layout: RFC 3339, UTC, milliseconds.
const contractTime = "2006-01-02T15:04:05.000Z"

// phonesInviteMember invites a member as the company's admin, sets the
// member's password through the e-mailed invite link and logs in.
func (e *env) phonesInviteMember(c company, email string) (id float64, access string) {
	e.t.Helper()
	r := e.do(call{method: "POST", path: "/users", token: c.access, body: map[string]any{
		"firstName": "Max", "lastName": "Member", "email": email, "role": "member",
	}})
	e.want(r, http.StatusCreated, "")
	id, ok := r.Body["id"].(float64)
	if !ok || id <= 0 {
		e.t.Fatalf("invite answer without an id: %s", r.Raw)
	}
	tok := mailtest.LinkToken(e.inbox.WaitFor(e.t, email, 10*time.Second).Text, "/reset-password")
	if tok == "" {
		e.t.Fatalf("no invite link in the mail to %s", email)
	}
	e.want(e.do(call{method: "POST", path: "/auth/reset-password", body: map[string]any{"token": tok, "password": goodPassword}}), http.StatusOK, "")
	access, _ = e.login(email, goodPassword)
	return id, access
}

// phonesPairingCode makes a pairing code with the token.
func (e *env) phonesPairingCode(token string) string {
	e.t.Helper()
	r := e.do(call{method: "POST", path: "/device/pairing", token: token})
	e.want(r, http.StatusCreated, "")
	return r.str("pairing_code")
}

// phonesRegisterBody is a phone's POST /device/register body.
func phonesRegisterBody(code, fingerprint string) map[string]any {
	return map[string]any{
		"pairing_code":       code,
		"device_fingerprint": fingerprint,
		"device_name":        "Pixel " + fingerprint,
		"sims": []map[string]any{
			{"slot": "SIM1", "carrier": "Acme Mobile", "phone_number": "+1 (555) 010-9001"},
			{"slot": "SIM2", "carrier": "Beta Tel", "phone_number": ""},
		},
		"fcm_token":   "fcm-" + fingerprint,
		"app_version": "1.4.2",
	}
}

func (e *env) phonesRegister(body any) resp {
	e.t.Helper()
	return e.do(call{method: "POST", path: "/device/register", body: body})
}

// phonesWantError checks an error answer, including its field.
func phonesWantError(t *testing.T, what string, r resp, status int, code, field string) {
	t.Helper()
	if r.Status != status || r.str("error") != code || r.str("field") != field || r.str("message") == "" {
		t.Errorf("%s: got %d %s, want %d %s field %q with a message", what, r.Status, r.Raw, status, code, field)
	}
}

// phonesList returns GET /device/list by fingerprint.
func (e *env) phonesList(token string) map[string]map[string]any {
	e.t.Helper()
	r := e.do(call{method: "GET", path: "/device/list", token: token})
	e.want(r, http.StatusOK, "")
	list, ok := r.Body["devices"].([]any)
	if !ok {
		e.t.Fatalf("/device/list: devices is not an array: %s", r.Raw)
	}
	out := map[string]map[string]any{}
	for _, item := range list {
		d, ok := item.(map[string]any)
		if !ok {
			e.t.Fatalf("/device/list: item is not an object: %s", r.Raw)
		}
		out[d["device_fingerprint"].(string)] = d
	}
	return out
}

// phonesDial dials /device/ws with a device token, as a raw WebSocket client.
func (e *env) phonesDial(token string) (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return websocket.Dial(ctx, e.wsURL(), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
}

// phonesWantRefused dials with the token and wants an HTTP refusal with the
// contract's JSON error body, and no socket.
func (e *env) phonesWantRefused(token string, status int, code string) {
	e.t.Helper()
	ws, res, err := e.phonesDial(token)
	if err == nil {
		ws.CloseNow()
		e.t.Fatalf("dial: the upgrade succeeded, want HTTP %d %s", status, code)
	}
	if res == nil {
		e.t.Fatalf("dial: no HTTP answer: %v", err)
	}
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		e.t.Fatalf("dial: got HTTP %d %s, want %d", res.StatusCode, raw, status)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		e.t.Errorf("dial: got Content-Type %q, want application/json", ct)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		e.t.Fatalf("dial: body is not JSON: %v: %s", err, raw)
	}
	if body["error"] != code {
		e.t.Errorf("dial: got error %v, want %q; body %s", body["error"], code, raw)
	}
	if m, _ := body["message"].(string); m == "" {
		e.t.Errorf("dial: error body without a message: %s", raw)
	}
}

// phonesWaitClosed waits for the phone's Run to end with a do-not-reconnect
// close code. The error goes back on vp.done for the cleanup.
func (e *env) phonesWaitClosed(vp *vphone, code int) {
	e.t.Helper()
	select {
	case err := <-vp.done:
		vp.done <- err
		var ce *client.ClosedError
		if !errors.As(err, &ce) {
			e.t.Fatalf("the phone stopped with %v, want a close with %d", err, code)
		}
		if ce.Code != code {
			e.t.Fatalf("got close code %d (%s), want %d", ce.Code, ce.Reason, code)
		}
	case <-time.After(10 * time.Second):
		e.t.Fatalf("the phone's link was not closed with %d within 10s", code)
	}
}

func TestPairingCodeAndQR(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	memberID, memberAccess := e.phonesInviteMember(a, "max@acme.test")

	wantExpiry := e.clock.Now().Add(10 * time.Minute).UTC().Format(contractTime)
	type made struct {
		code, uri string
		userID    float64
	}
	var codes []made
	for _, who := range []struct {
		name, token string
		userID      float64
	}{{"member", memberAccess, memberID}, {"API key", a.apiKey, a.adminID}} {
		r := e.do(call{method: "POST", path: "/device/pairing", token: who.token})
		e.want(r, http.StatusCreated, "")
		code, uri := r.str("pairing_code"), r.str("pairing_uri")
		if got, want := slices.Sorted(maps.Keys(r.Body)), []string{"expires_at", "pairing_code", "pairing_uri"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got keys %v, want %v", who.name, got, want)
		}
		if !pairingCodeRE.MatchString(code) {
			t.Errorf("%s: got pairing_code %q, want 8 characters of Crockford base32", who.name, code)
		}
		if !strings.HasPrefix(uri, "simrelay://pair?server=") || !strings.Contains(uri, code) {
			t.Errorf("%s: got pairing_uri %q, want simrelay://pair?server=... holding %s", who.name, uri, code)
		}
		if u, err := url.Parse(uri); err != nil || u.Query().Get("server") != e.url || u.Query().Get("code") != code {
			t.Errorf("%s: got pairing_uri %q, want server=%s and code=%s", who.name, uri, e.url, code)
		}
		if got := r.str("expires_at"); got != wantExpiry {
			t.Errorf("%s: got expires_at %q, want %q", who.name, got, wantExpiry)
		}
		for _, m := range codes {
			if m.code == code {
				t.Errorf("%s: pairing code %s handed out twice", who.name, code)
			}
		}
		codes = append(codes, made{code, uri, who.userID})

		// The QR image decodes to the pairing URI.
		qr := e.do(call{method: "GET", path: "/device/pairing/" + code + "/qr.png", token: who.token})
		e.want(qr, http.StatusOK, "")
		if ct := qr.Header.Get("Content-Type"); ct != "image/png" {
			t.Errorf("%s: got Content-Type %q, want image/png", who.name, ct)
		}
		img, err := png.Decode(bytes.NewReader(qr.Raw))
		if err != nil {
			t.Fatalf("%s: qr.png is not a PNG: %v", who.name, err)
		}
		bmp, err := gozxing.NewBinaryBitmapFromImage(img)
		if err != nil {
			t.Fatal(err)
		}
		// The image is a generated, unrotated code: PURE_BARCODE reads it
		// directly (gozxing's finder-pattern search misreads about one in a
		// hundred perfect images, which says nothing about the server).
		res, err := qrcode.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
		if err != nil {
			t.Fatalf("%s: qr.png does not decode as a QR code: %v", who.name, err)
		}
		if got := res.GetText(); got != uri {
			t.Errorf("%s: got QR text %q, want %q", who.name, got, uri)
		}

		// Another company cannot see the code.
		e.want(e.do(call{method: "GET", path: "/device/pairing/" + code + "/qr.png", token: b.apiKey}), http.StatusNotFound, "not_found")
	}

	// Without a credential there is no pairing and no QR.
	e.want(e.do(call{method: "POST", path: "/device/pairing"}), http.StatusUnauthorized, "unauthorized")
	e.want(e.do(call{method: "GET", path: "/device/pairing/" + codes[0].code + "/qr.png"}), http.StatusUnauthorized, "unauthorized")
	e.want(e.do(call{method: "GET", path: "/device/pairing/ABCDEFGH/qr.png", token: a.apiKey}), http.StatusNotFound, "not_found")

	// The device belongs to whoever made the code; a used code's QR is gone.
	for i, m := range codes {
		fp := "paired-" + string(rune('a'+i))
		r := e.phonesRegister(phonesRegisterBody(m.code, fp))
		e.want(r, http.StatusCreated, "")
		dev, _ := r.Body["device"].(map[string]any)
		if dev["user_id"] != m.userID {
			t.Errorf("%s: got user_id %v, want %v", fp, dev["user_id"], m.userID)
		}
		e.want(e.do(call{method: "GET", path: "/device/pairing/" + m.code + "/qr.png", token: a.apiKey}), http.StatusNotFound, "not_found")
	}
}

func TestRegisterDeviceAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	memberID, memberAccess := e.phonesInviteMember(a, "max@acme.test")
	// A later admin, whose e-mail sorts first, is not the company's first admin.
	e.want(e.do(call{method: "POST", path: "/users", token: a.access, body: map[string]any{
		"firstName": "Ada", "lastName": "Later", "email": "aaa@acme.test", "role": "admin",
	}}), http.StatusCreated, "")

	for _, c := range []struct {
		name, token, fp string
		userID          float64
	}{
		{"API-key code", a.apiKey, "pixel-7.a:01", a.adminID},
		{"member code", memberAccess, "pixel-8_b-02", memberID},
	} {
		r := e.phonesRegister(phonesRegisterBody(e.phonesPairingCode(c.token), c.fp))
		e.want(r, http.StatusCreated, "")
		if got, want := slices.Sorted(maps.Keys(r.Body)), []string{"device", "device_token", "ws_url"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got keys %v, want %v", c.name, got, want)
		}
		if tok := r.str("device_token"); !strings.HasPrefix(tok, "dt_") || len(tok) < 20 {
			t.Errorf("%s: got device_token %q, want dt_...", c.name, tok)
		}
		if ws := r.str("ws_url"); !strings.HasSuffix(ws, "/device/ws") || ws != e.wsURL() {
			t.Errorf("%s: got ws_url %q, want %q", c.name, ws, e.wsURL())
		}
		dev, ok := r.Body["device"].(map[string]any)
		if !ok {
			t.Fatalf("%s: device is not an object: %s", c.name, r.Raw)
		}
		want := map[string]any{
			"device_fingerprint": c.fp,
			"device_name":        "Pixel " + c.fp,
			"status":             "active",
			"selected_sim":       "BOTH",
			"user_id":            c.userID,
			"fcm_token":          "fcm-" + c.fp,
			"online":             false,
			"last_seen_at":       nil,
			"sims": []any{
				map[string]any{"slot": "SIM1", "carrier": "Acme Mobile", "phone_number": "+15550109001"},
				map[string]any{"slot": "SIM2", "carrier": "Beta Tel", "phone_number": ""},
			},
			"app_version": "1.4.2",
			"created_at":  e.clock.Now().UTC().Format(contractTime),
		}
		for k, v := range want {
			got, ok := dev[k]
			if !ok {
				t.Errorf("%s: device without %s: %s", c.name, k, r.Raw)
			} else if !reflect.DeepEqual(got, v) {
				t.Errorf("%s: got device.%s %v, want %v", c.name, k, got, v)
			}
		}
		if r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: got Cache-Control %q on an answer with a token, want no-store", c.name, r.Header.Get("Cache-Control"))
		}
	}
}

func TestRegisterDeviceErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")

	used := e.phonesPairingCode(a.apiKey)
	e.want(e.phonesRegister(phonesRegisterBody(used, "first-phone")), http.StatusCreated, "")
	phonesWantError(t, "reused code", e.phonesRegister(phonesRegisterBody(used, "second-phone")), 400, "invalid_token", "pairing_code")
	r := e.phonesRegister(phonesRegisterBody("ZZZZZZZZ", "second-phone"))
	if r.Status != 400 || r.str("error") != "invalid_token" {
		t.Errorf("unknown code: got %d %s, want 400 invalid_token", r.Status, r.Raw)
	}

	code := e.phonesPairingCode(a.apiKey)
	threeSIMs := phonesRegisterBody(code, "p3")
	threeSIMs["sims"] = []map[string]any{{"slot": "SIM1"}, {"slot": "SIM2"}, {"slot": "SIM1"}}
	badSlot := phonesRegisterBody(code, "p3")
	badSlot["sims"] = []map[string]any{{"slot": "SIM3"}}
	slotNumber := phonesRegisterBody(code, "p3")
	slotNumber["sims"] = []map[string]any{{"slot": "SIM1"}, {"slot": 2}}
	noPlus := phonesRegisterBody(code, "p3")
	noPlus["sims"] = []map[string]any{{"slot": "SIM1", "phone_number": "5550109001"}}
	cases := []struct {
		name  string
		body  any
		code  string
		field string
	}{
		{"fingerprint with a space", phonesRegisterBody(code, "has space"), "validation_failed", "device_fingerprint"},
		{"empty fingerprint", phonesRegisterBody(code, ""), "validation_failed", "device_fingerprint"},
		{"three sims", threeSIMs, "validation_failed", "sims"},
		{"slot SIM3", badSlot, "validation_failed", "sims[0].slot"},
		{"slot a number", slotNumber, "validation_failed", "sims[1].slot"},
		{"number without +", noPlus, "validation_failed", "sims[0].phone_number"},
		{"malformed JSON", `{"pairing_code": `, "invalid_json", ""},
		{"empty body", "", "invalid_json", ""},
	}
	for _, c := range cases {
		phonesWantError(t, c.name, e.phonesRegister(c.body), 400, c.code, c.field)
	}
	// Refused input does not spend the code.
	e.want(e.phonesRegister(phonesRegisterBody(code, "p3")), http.StatusCreated, "")

	// A fingerprint of company A cannot be taken with company B's code.
	phonesWantError(t, "another company's fingerprint", e.phonesRegister(phonesRegisterBody(e.phonesPairingCode(b.apiKey), "first-phone")), 409, "conflict", "")
	if _, ok := e.phonesList(b.apiKey)["first-phone"]; ok {
		t.Errorf("company B lists company A's device after a refused registration")
	}
	if d, ok := e.phonesList(a.apiKey)["first-phone"]; !ok || d["device_name"] != "Pixel first-phone" {
		t.Errorf("company A's device after B's attempt: got %v", d)
	}

	// A code lasts ten minutes.
	late := e.phonesPairingCode(a.apiKey)
	e.clock.Advance(10*time.Minute + time.Second)
	phonesWantError(t, "expired code", e.phonesRegister(phonesRegisterBody(late, "late-phone")), 400, "invalid_token", "pairing_code")
	if r := e.do(call{method: "GET", path: "/device/pairing/" + late + "/qr.png", token: a.apiKey}); r.Status != http.StatusNotFound {
		t.Errorf("QR of an expired code: got %d %s, want 404", r.Status, r.Raw)
	}
}

func TestReRegisterRevokesOldToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	old := e.pairPhone(a.apiKey, "re-phone")
	vp := e.runPhone(old, "BOTH", false)

	r := e.phonesRegister(phonesRegisterBody(e.phonesPairingCode(a.apiKey), "re-phone"))
	e.want(r, http.StatusCreated, "")
	fresh := client.Registration{DeviceToken: r.str("device_token"), WSURL: r.str("ws_url")}
	if fresh.DeviceToken == old.DeviceToken || !strings.HasPrefix(fresh.DeviceToken, "dt_") {
		t.Fatalf("got device_token %q, want a new dt_ token", fresh.DeviceToken)
	}

	// The live link on the old token is closed for good; the old token is refused.
	e.phonesWaitClosed(vp, 4501)
	e.phonesWantRefused(old.DeviceToken, http.StatusUnauthorized, "unauthorized")

	// The new token connects; the company still has one device of that fingerprint.
	nvp := e.runPhone(fresh, "SIM1", false)
	list := e.phonesList(a.apiKey)
	if len(list) != 1 || list["re-phone"] == nil {
		t.Fatalf("got devices %v, want just re-phone", keysOfList(list))
	}
	if list["re-phone"]["online"] != true {
		t.Errorf("got online %v for the phone on the new token, want true", list["re-phone"]["online"])
	}
	if !nvp.Connected() {
		t.Errorf("the phone on the new token is not connected")
	}
}

func keysOfList(m map[string]map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestDeviceLists(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	_, memberAccess := e.phonesInviteMember(a, "max@acme.test")
	e.runPhone(e.pairPhone(a.apiKey, "live-phone"), "SIM1", false)
	e.pairPhone(memberAccess, "idle-phone")

	for _, token := range []string{a.apiKey, a.access, memberAccess} {
		r := e.do(call{method: "GET", path: "/chat/devices", token: token})
		e.want(r, http.StatusOK, "")
		items, _ := r.Body["devices"].([]any)
		if len(items) != 2 {
			t.Fatalf("/chat/devices: got %s, want two devices", r.Raw)
		}
		seen := map[string]bool{}
		for _, it := range items {
			d := it.(map[string]any)
			if got, want := slices.Sorted(maps.Keys(d)), []string{"device_fingerprint", "device_name", "selected_sim", "status"}; !reflect.DeepEqual(got, want) {
				t.Errorf("/chat/devices: got keys %v, want %v", got, want)
			}
			fp, _ := d["device_fingerprint"].(string)
			seen[fp] = true
			if d["status"] != "active" || d["device_name"] != "Phone "+fp {
				t.Errorf("/chat/devices: got %v", d)
			}
		}
		if !seen["live-phone"] || !seen["idle-phone"] {
			t.Errorf("/chat/devices: got %s, want live-phone and idle-phone", r.Raw)
		}
	}

	list := e.phonesList(memberAccess)
	if len(list) != 2 {
		t.Fatalf("/device/list: got %v, want live-phone and idle-phone", keysOfList(list))
	}
	live, idle := list["live-phone"], list["idle-phone"]
	if live["online"] != true {
		t.Errorf("live-phone: got online %v, want true", live["online"])
	}
	if s, ok := live["last_seen_at"].(string); !ok || s == "" {
		t.Errorf("live-phone: got last_seen_at %v, want a time", live["last_seen_at"])
	} else if _, err := time.Parse(time.RFC3339, s); err != nil {
		t.Errorf("live-phone: last_seen_at %q is not RFC 3339: %v", s, err)
	}
	if live["selected_sim"] != "SIM1" {
		t.Errorf("live-phone: got selected_sim %v, want SIM1 (from its hello)", live["selected_sim"])
	}
	if idle["online"] != false || idle["last_seen_at"] != nil {
		t.Errorf("idle-phone: got online %v last_seen_at %v, want false and null", idle["online"], idle["last_seen_at"])
	}
	for fp, d := range list {
		for _, k := range []string{"device_fingerprint", "device_name", "status", "selected_sim", "user_id", "fcm_token", "online", "last_seen_at", "sims", "app_version", "created_at"} {
			if _, ok := d[k]; !ok {
				t.Errorf("%s: /device/list item without %s", fp, k)
			}
		}
	}

	// Company B sees none of them.
	for _, path := range []string{"/chat/devices", "/device/list"} {
		r := e.do(call{method: "GET", path: path, token: b.apiKey})
		e.want(r, http.StatusOK, "")
		if items, ok := r.Body["devices"].([]any); !ok || len(items) != 0 {
			t.Errorf("company B %s: got %s, want {\"devices\":[]}", path, r.Raw)
		}
	}
	e.want(e.do(call{method: "GET", path: "/device/list"}), http.StatusUnauthorized, "unauthorized")
}

func TestDevicePatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	_, memberAccess := e.phonesInviteMember(a, "max@acme.test")
	reg := e.pairPhone(a.apiKey, "desk-phone")
	vp := e.runPhone(reg, "BOTH", false)
	path := "/device/desk-phone"

	// selected_sim changes and reaches the phone as a config frame.
	r := e.do(call{method: "PATCH", path: path, token: memberAccess, body: map[string]any{"selected_sim": "SIM2"}})
	e.want(r, http.StatusOK, "")
	if r.str("selected_sim") != "SIM2" || r.str("device_fingerprint") != "desk-phone" || r.str("status") != "active" || r.Body["online"] != true {
		t.Errorf("PATCH selected_sim: got %s, want the detail with selected_sim SIM2, online", r.Raw)
	}
	e.eventually("the phone gets selected_sim SIM2", func() bool { return vp.SelectedSIM() == "SIM2" })

	r = e.do(call{method: "PATCH", path: path, token: a.apiKey, body: map[string]any{"device_name": "  Front desk  "}})
	e.want(r, http.StatusOK, "")
	if r.str("device_name") != "Front desk" || r.str("selected_sim") != "SIM2" {
		t.Errorf("PATCH device_name: got %s, want device_name \"Front desk\" and selected_sim kept", r.Raw)
	}
	if d := e.phonesList(a.apiKey)["desk-phone"]; d["device_name"] != "Front desk" || d["selected_sim"] != "SIM2" {
		t.Errorf("/device/list after PATCH: got %v", d)
	}

	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"selected_sim SIM3", map[string]any{"selected_sim": "SIM3"}, "selected_sim"},
		{"selected_sim lower-case", map[string]any{"selected_sim": "sim1"}, "selected_sim"},
		{"selected_sim a number", map[string]any{"selected_sim": 2}, "selected_sim"},
		{"status paused", map[string]any{"status": "paused"}, "status"},
		{"empty device_name", map[string]any{"device_name": "  "}, "device_name"},
	}
	for _, c := range cases {
		phonesWantError(t, c.name, e.do(call{method: "PATCH", path: path, token: a.apiKey, body: c.body}), 400, "validation_failed", c.field)
	}
	phonesWantError(t, "malformed JSON", e.do(call{method: "PATCH", path: path, token: a.apiKey, body: `{"status":`}), 400, "invalid_json", "")

	// Another company's device, and an unknown one, are not found.
	e.want(e.do(call{method: "PATCH", path: path, token: b.apiKey, body: map[string]any{"status": "disabled"}}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "PATCH", path: "/device/no-such-phone", token: a.apiKey, body: map[string]any{"device_name": "x"}}), http.StatusNotFound, "not_found")
	if d := e.phonesList(a.apiKey)["desk-phone"]; d["status"] != "active" || d["online"] != true {
		t.Fatalf("after company B's PATCH: got %v, want active and online", d)
	}

	// Disabling closes the live link for good and refuses reconnects.
	r = e.do(call{method: "PATCH", path: path, token: a.apiKey, body: map[string]any{"status": "disabled"}})
	e.want(r, http.StatusOK, "")
	if r.str("status") != "disabled" {
		t.Errorf("PATCH status disabled: got %s", r.Raw)
	}
	e.phonesWaitClosed(vp, 4503)
	e.phonesWantRefused(reg.DeviceToken, http.StatusForbidden, "device_disabled")
	e.eventually("the disabled phone is offline", func() bool { return e.phonesList(a.apiKey)["desk-phone"]["online"] == false })

	// Enabled again, the same token connects.
	r = e.do(call{method: "PATCH", path: path, token: a.apiKey, body: map[string]any{"status": "active"}})
	e.want(r, http.StatusOK, "")
	if r.str("status") != "active" || r.str("selected_sim") != "SIM2" || r.str("device_name") != "Front desk" {
		t.Errorf("PATCH status active: got %s", r.Raw)
	}
	again := e.runPhone(reg, "", false)
	if d := e.phonesList(a.apiKey)["desk-phone"]; d["online"] != true || d["status"] != "active" {
		t.Errorf("after enabling: got %v, want active and online", d)
	}
	if !again.Connected() {
		t.Errorf("the re-enabled phone is not connected")
	}
	// The settings changed while the phone was away reach it in the welcome.
	if w := again.Welcome(); w.SelectedSIM != "SIM2" || w.DeviceName != "Front desk" || again.SelectedSIM() != "SIM2" {
		t.Errorf("welcome after reconnect: got %+v (phone holds %q), want selected_sim SIM2 and device_name Front desk", w, again.SelectedSIM())
	}
}

func TestDeviceDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	_, memberAccess := e.phonesInviteMember(a, "max@acme.test")
	reg := e.pairPhone(a.apiKey, "old-phone")
	vp := e.runPhone(reg, "BOTH", false)
	e.pairPhone(a.apiKey, "kept-phone")
	path := "/device/delete/old-phone"

	e.want(e.do(call{method: "DELETE", path: path, token: memberAccess}), http.StatusForbidden, "forbidden")
	e.want(e.do(call{method: "DELETE", path: path, token: b.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "DELETE", path: path}), http.StatusUnauthorized, "unauthorized")
	if d := e.phonesList(a.apiKey)["old-phone"]; d == nil || d["online"] != true {
		t.Fatalf("after refused deletes: got %v, want the device, online", d)
	}

	r := e.do(call{method: "DELETE", path: path, token: a.access})
	e.want(r, http.StatusOK, "")
	if r.str("message") == "" {
		t.Errorf("DELETE: got %s, want {message}", r.Raw)
	}
	e.phonesWaitClosed(vp, 4503)
	e.phonesWantRefused(reg.DeviceToken, http.StatusUnauthorized, "unauthorized")
	list := e.phonesList(a.apiKey)
	if _, ok := list["old-phone"]; ok || len(list) != 1 || list["kept-phone"] == nil {
		t.Errorf("/device/list after delete: got %v, want just kept-phone", keysOfList(list))
	}
	e.want(e.do(call{method: "DELETE", path: path, token: a.access}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "PATCH", path: "/device/old-phone", token: a.apiKey, body: map[string]any{"device_name": "x"}}), http.StatusNotFound, "not_found")
}

func TestPhoneSocketRateLimitPerDevice(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // the default limits: 100 a minute
	a := e.newCompany("Acme", "owner@acme.test")
	one := e.pairPhone(a.apiKey, "rl-one")
	two := e.pairPhone(a.apiKey, "rl-two")

	dial := func(token string) (limit, remaining string) {
		t.Helper()
		ws, res, err := e.phonesDial(token)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer ws.CloseNow()
		if res.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("dial: got HTTP %d, want 101", res.StatusCode)
		}
		return res.Header.Get("RateLimit-Limit"), res.Header.Get("RateLimit-Remaining")
	}
	if l, r := dial(one.DeviceToken); l != "100" || r != "99" {
		t.Errorf("first device, first dial: got RateLimit-Limit %q Remaining %q, want 100 and 99", l, r)
	}
	if l, r := dial(one.DeviceToken); l != "100" || r != "98" {
		t.Errorf("first device, second dial: got RateLimit-Limit %q Remaining %q, want 100 and 98", l, r)
	}
	// Same IP, another device: its own window.
	if l, r := dial(two.DeviceToken); l != "100" || r != "99" {
		t.Errorf("second device, first dial: got RateLimit-Limit %q Remaining %q, want 100 and 99", l, r)
	}
}

// phonesHelloOutcome sends hello on a raw link and reads until the server
// closes it; it reports a welcome, or the close code.
func (e *env) phonesHelloOutcome(ws *websocket.Conn) (welcomed bool, code websocket.StatusCode) {
	e.t.Helper()
	data, err := proto.Encode(proto.Hello{Protocol: proto.Version, AppVersion: "raw", SelectedSIM: "BOTH"})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
		e.t.Fatalf("write hello: %v", err)
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				e.t.Fatalf("neither welcome nor close within 10s")
			}
			return false, websocket.CloseStatus(err)
		}
		f, err := proto.Decode(data)
		if err != nil {
			continue
		}
		if _, ok := f.(*proto.Welcome); ok {
			return true, -1
		}
	}
}

// A link upgraded while its token and device were good, but whose device
// was registered again, disabled or deleted before its hello, must not
// become a live link: it ends at its hello with the code the phone must see.
func TestDeviceChangedDuringHello(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(e *env, apiKey string)
		code   websocket.StatusCode
	}{
		{"registered again", func(e *env, apiKey string) {
			e.want(e.phonesRegister(phonesRegisterBody(e.phonesPairingCode(apiKey), "slow-phone")), http.StatusCreated, "")
		}, 4501},
		{"disabled", func(e *env, apiKey string) {
			e.want(e.do(call{method: "PATCH", path: "/device/slow-phone", token: apiKey, body: map[string]any{"status": "disabled"}}), http.StatusOK, "")
		}, 4503},
		{"deleted", func(e *env, apiKey string) {
			e.want(e.do(call{method: "DELETE", path: "/device/delete/slow-phone", token: apiKey}), http.StatusOK, "")
		}, 4503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, roomy)
			a := e.newCompany("Acme", "owner@acme.test")
			reg := e.pairPhone(a.apiKey, "slow-phone")
			ws, _, err := e.phonesDial(reg.DeviceToken)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer ws.CloseNow()

			tc.change(e, a.apiKey)
			if welcomed, code := e.phonesHelloOutcome(ws); welcomed || code != tc.code {
				t.Fatalf("got welcomed=%v, close %d; want no welcome and close %d", welcomed, code, tc.code)
			}
			if tc.name == "deleted" {
				if _, ok := e.phonesList(a.apiKey)["slow-phone"]; ok {
					t.Errorf("the deleted device is listed again after its hello")
				}
			}
		})
	}
}

// busyPhone links the company's phone "busy-phone" and has it report an SMS
// a minute after its hello; it returns that time, the link's last activity,
// as the API writes it.
func busyPhone(t *testing.T, e *env, access string) string {
	t.Helper()
	vp := e.runPhone(e.pairPhone(access, "busy-phone"), "SIM1", false)
	e.clock.Advance(time.Minute)
	at := e.clock.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	waitAck(t, vp.Receive(proto.Inbound{ClientID: "in-1", From: "+15557654321", Message: "hi", SIMSlot: "SIM1", ReceivedAt: at}))
	return at
}

// A device disabled while its phone is linked is offline from the PATCH,
// last seen at the link's last activity (here an SMS it reported a minute
// after its hello), in the PATCH's answer and in a list read right after:
// they showed the time the hello stored until the link's end stored its own.
func TestDisabledDeviceLastSeenIsItsLinksLastActivity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.example")
	want := busyPhone(t, e, a.access)
	if got := e.phonesList(a.access)["busy-phone"]; got["online"] != true || got["last_seen_at"] != want {
		t.Fatalf("linked: online %v, last seen %v; want true, %s", got["online"], got["last_seen_at"], want)
	}
	e.clock.Advance(time.Minute)
	r := e.do(call{method: "PATCH", path: "/device/busy-phone", token: a.access, body: map[string]any{"status": "disabled"}})
	e.want(r, http.StatusOK, "")
	if r.Body["online"] != false || r.Body["last_seen_at"] != want {
		t.Errorf("the PATCH's answer: online %v, last seen %v; want false, %s", r.Body["online"], r.Body["last_seen_at"], want)
	}
	if got := e.phonesList(a.access)["busy-phone"]; got["online"] != false || got["last_seen_at"] != want {
		t.Errorf("listed right after: online %v, last seen %v; want false, %s", got["online"], got["last_seen_at"], want)
	}
}

// A linked device paired again: the registration's answer shows the old
// link's last activity, as the PATCH that disables one does, not the time
// its hello stored.
func TestRepairedDeviceAnswersItsLinksLastSeen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.example")
	want := busyPhone(t, e, a.access)
	e.clock.Advance(time.Minute)
	code := e.do(call{method: "POST", path: "/device/pairing", token: a.access})
	e.want(code, http.StatusCreated, "")
	r := e.do(call{method: "POST", path: "/device/register", body: map[string]any{"pairing_code": code.str("pairing_code"), "device_fingerprint": "busy-phone"}})
	e.want(r, http.StatusCreated, "")
	d, _ := r.Body["device"].(map[string]any)
	if d["online"] != false || d["last_seen_at"] != want {
		t.Errorf("the registration's answer: online %v, last seen %v; want false, %s", d["online"], d["last_seen_at"], want)
	}
	if got := e.phonesList(a.access)["busy-phone"]; got["last_seen_at"] != want {
		t.Errorf("listed right after: last seen %v, want %s", got["last_seen_at"], want)
	}
}

// A registration asks the hub where its device is linked at most once: on
// a cluster each question is a query to the database for the links on
// other nodes. A new device has no link and asks nothing; a linked device
// paired again asks once, for its old link's last activity before the link
// is closed. After that close the device is offline (its new token is in
// the answer only), so the answer needs no second question, which on a
// cluster could still find the closing link's row open.
func TestRegistrationAsksPresenceAtMostOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.newCompany("Acme", "ana@acme.example")
	register := func(fp string) map[string]any {
		t.Helper()
		code := e.do(call{method: "POST", path: "/device/pairing", token: a.access})
		e.want(code, http.StatusCreated, "")
		r := e.do(call{method: "POST", path: "/device/register", body: map[string]any{"pairing_code": code.str("pairing_code"), "device_fingerprint": fp}})
		e.want(r, http.StatusCreated, "")
		d, _ := r.Body["device"].(map[string]any)
		return d
	}
	before := e.phones.presence.Load()
	if d := register("new-phone"); d["online"] != false || d["last_seen_at"] != nil {
		t.Errorf("a new device's answer: online %v, last seen %v; want false, null", d["online"], d["last_seen_at"])
	}
	if asked := e.phones.presence.Load() - before; asked != 0 {
		t.Errorf("a new device's registration asked the hub %d times, want none", asked)
	}

	want := busyPhone(t, e, a.access)
	before = e.phones.presence.Load()
	if d := register("busy-phone"); d["online"] != false || d["last_seen_at"] != want {
		t.Errorf("a linked device paired again: online %v, last seen %v; want false, %s", d["online"], d["last_seen_at"], want)
	}
	if asked := e.phones.presence.Load() - before; asked != 1 {
		t.Errorf("a linked device paired again asked the hub %d times, want once", asked)
	}
}
