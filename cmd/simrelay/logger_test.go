package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// TestLogLinesShowDirectionControls pins the log side of docs/security.md's
// "Text direction": in the text format (the default) a name holding a
// right-to-left override is written with the override spelled out as \u202e,
// so it cannot turn the rest of an operator's terminal line around, and
// right-to-left letters stay readable; the JSON format carries the string
// exactly as it came, for the programs that read it.
func TestLogLinesShowDirectionControls(t *testing.T) {
	var text bytes.Buffer
	newLogger(&text, "text", slog.LevelInfo).Info("device renamed", "name", "Evil\u202e 1", "carrier", "هاتف")
	line := text.String()
	if strings.ContainsRune(line, '\u202e') || !strings.Contains(line, `name="Evil\u202e 1"`) || !strings.Contains(line, "carrier=هاتف") {
		t.Errorf("text log line: %q", line)
	}

	var js bytes.Buffer
	newLogger(&js, "json", slog.LevelInfo).Info("device renamed", "name", "Evil\u202e 1")
	var rec struct{ Name string }
	if err := json.Unmarshal(js.Bytes(), &rec); err != nil || rec.Name != "Evil\u202e 1" {
		t.Errorf("JSON log line %q: name %q, %v", js.String(), rec.Name, err)
	}
}

// A pairing code is a credential for ten minutes (whoever holds it pairs a
// phone into the company, and that phone gets its sends): the request line
// of GET /device/pairing/{code}/qr.png logged it in clear at INFO, and a
// path the route never matched (//device/pairing/{code}/qr.png, from a base
// URL ending in a slash, redirected) still did.
func TestRequestLogHidesThePairingCode(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	st := newTestStore(t)
	key := createCompany(t, bin, st)
	srv := startServer(t, bin, st)
	res, raw := post(t, srv.url+"/device/pairing", key, "")
	var pairing struct {
		Code string `json:"pairing_code"`
	}
	if err := json.Unmarshal(raw, &pairing); err != nil || res.StatusCode != http.StatusCreated || pairing.Code == "" {
		t.Fatalf("POST /device/pairing: %d %s", res.StatusCode, raw)
	}
	if status, _ := get(t, srv.url+"/device/pairing/"+pairing.Code+"/qr.png", key); status != http.StatusOK {
		t.Fatalf("GET qr.png: %d", status)
	}
	// The same code in paths the route never sees: a client's base URL
	// ending in a slash (308 to the clean path), dot segments (308), a
	// trailing slash (404), an encoded slash (404), in a lower case.
	lower := strings.ToLower(pairing.Code)
	for _, p := range []string{"//device/pairing/" + pairing.Code + "/qr.png", "/device/./pairing/" + pairing.Code + "/qr.png",
		"/device/pairing/" + pairing.Code + "/qr.png/", "/device/pairing/" + pairing.Code + "%2Fqr.png", "/device/pairing/" + lower + "/x/"} {
		req, _ := http.NewRequest("GET", srv.url+p, nil)
		req.URL.Opaque = "//" + req.URL.Host + p // sent as written, not cleaned by the client
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := testhttp.Transport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	for _, line := range []string{"path=/device/pairing/xxxxx/qr.png status=200", "path=//device/pairing/xxxxx/qr.png status=308",
		"path=/device/./pairing/xxxxx/qr.png status=308", "path=/device/pairing/xxxxx/qr.png/ status=404",
		"path=/device/pairing/xxxxx status=404", "path=/device/pairing/xxxxx/x/ status=404"} {
		poll.Until(t, line, func() bool { return strings.Contains(srv.stderr.String(), line) })
	}
	if strings.Contains(strings.ToLower(srv.stderr.String()), lower) {
		t.Errorf("the log shows the pairing code %s:\n%s", pairing.Code, srv.stderr.String())
	}
}
