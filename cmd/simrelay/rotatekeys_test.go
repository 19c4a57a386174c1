package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/store"
)

// admin rotate-keys replaces the server's own keys: refused while a
// server runs on the store, it then replaces them all in one go and says
// so by name. After a restart on the same store the access token signed
// before is refused, and so is a media link signed before; the company's
// API key, re-sealed under the new seal key, still works and reads back
// the same; a fresh sign-in works, and so does the refresh token of the
// sign-in before (the store keeps only its hash, nothing a key signs).
func TestAdminRotateKeys(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)

	// A file of the company's, and a link to it as the server signs one.
	b := openTestBackend(t, st)
	ids, err := b.CompanyIDs()
	if err != nil || len(ids) != 1 {
		t.Fatalf("companies: %v (%v)", ids, err)
	}
	if err := b.ProvisionDevices([]store.Device{{Fingerprint: "pixel-1", CompanyID: ids[0], Name: "Pixel",
		Status: store.DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("token of pixel-1"), CreatedAt: time.Now().UTC()}}); err != nil {
		t.Fatal(err)
	}
	dev, err := b.CompanyDevice(ids[0], "pixel-1")
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("a picture")
	if _, _, err := b.PutMedia(store.Media{ID: "med_rotate", CompanyID: ids[0], DeviceID: dev.ID, Key: "c1/0", ContentType: "text/plain",
		Size: int64(len(data))}, bytes.NewReader(data), time.Now()); err != nil {
		t.Fatal(err)
	}
	const number = "+15550001111"
	if _, err := b.AnnounceNumbers(ids[0], dev.ID, store.ChannelNameWhatsApp, []string{number}, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	in := store.Message{UUID: "in-rotate", CompanyID: ids[0], DeviceID: dev.ID, Channel: store.ChannelNameWhatsApp,
		Phone: "+15557654321", Account: number, ClientID: "c1", Media: []store.MediaRef{{ID: "med_rotate"}}}
	if _, _, err := b.StoreAgentInbound(&in, time.Now); err != nil {
		t.Fatal(err)
	}
	mediaKey, err := b.Secret(media.KeySecret, 32)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := media.New(media.Config{Key: mediaKey}, b, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	link, _ := signer.URL("med_rotate")
	b.Close()

	srv := startServer(t, bin, st)
	access, refresh := signIn(t, srv.url)
	if code, body := get(t, srv.url+"/users/me", access); code != 200 {
		t.Fatalf("GET /users/me with the access token: %d %s", code, body)
	}
	if code, body := get(t, srv.url+"/company", apiKey); code != 200 {
		t.Fatalf("GET /company with the API key: %d %s", code, body)
	}
	if code, body := get(t, srv.url+link, ""); code != 200 || !bytes.Equal(body, data) {
		t.Fatalf("the media link: %d %q, want 200 and the file", code, body)
	}

	// A running server (a live node) is refused; nothing is replaced.
	admin := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, append(append([]string{"admin"}, args...), st.args()...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}
	code, out, errOut := admin("rotate-keys")
	if code != 1 || !strings.Contains(errOut, "nothing was replaced") || out != "" {
		t.Fatalf("rotate-keys beside a running server: exit %d %q %q, want 1 and nothing replaced", code, out, errOut)
	}
	if code, body := get(t, srv.url+"/users/me", access); code != 200 {
		t.Fatalf("GET /users/me after a refused rotation: %d %s", code, body)
	}
	stopServer(t, srv)

	code, out, errOut = admin("rotate-keys")
	if code != 0 {
		t.Fatalf("rotate-keys: exit %d %q %q", code, out, errOut)
	}
	for _, want := range []string{account.JWTSecret, account.SealSecret, account.LoginSecret, account.DeviceSecret, media.KeySecret, "console-flash",
		"Re-sealed 1 company's API key", "POST /account/api-key/rotate", "What users will see",
		// The copy held each company's webhook signing secret as it is.
		"POST /webhooks/signing-secret/rotate"} {
		if !strings.Contains(out, want) {
			t.Errorf("rotate-keys printed no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, hex.EncodeToString(mediaKey)) || strings.Contains(out, "bus-cluster-id") {
		t.Errorf("rotate-keys printed a key's value, or the cluster's id:\n%s", out)
	}

	srv = startServer(t, bin, st)
	if code, body := get(t, srv.url+"/users/me", access); code != 401 || !strings.Contains(string(body), `"unauthorized"`) {
		t.Fatalf("GET /users/me with the access token signed before the rotation: %d %s, want 401", code, body)
	}
	if code, body := get(t, srv.url+link, ""); code != 403 || !strings.Contains(string(body), `"forbidden"`) {
		t.Fatalf("the media link signed before the rotation: %d %s, want 403", code, body)
	}
	if code, body := get(t, srv.url+"/company", apiKey); code != 200 {
		t.Fatalf("GET /company with the API key after the rotation: %d %s, want 200", code, body)
	}
	code, body := get(t, srv.url+"/account/api-key", apiKey)
	var shown struct {
		APIKey string `json:"apiKey"`
	}
	if err := json.Unmarshal(body, &shown); code != 200 || err != nil || shown.APIKey != apiKey {
		t.Fatalf("GET /account/api-key after the rotation: %d %s, want the same key", code, body)
	}
	fresh, _ := signIn(t, srv.url)
	if code, body := get(t, srv.url+"/users/me", fresh); code != 200 {
		t.Fatalf("GET /users/me after a fresh sign-in: %d %s", code, body)
	}
	res, body := post(t, srv.url+"/auth/refresh", "", `{"refreshToken":"`+refresh+`"}`)
	var renewed struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(body, &renewed); res.StatusCode != 200 || err != nil || renewed.AccessToken == "" {
		t.Fatalf("POST /auth/refresh with the refresh token of before: %d %s", res.StatusCode, body)
	}
	if code, body := get(t, srv.url+"/users/me", renewed.AccessToken); code != 200 {
		t.Fatalf("GET /users/me with the refreshed access token: %d %s", code, body)
	}
	stopServer(t, srv)
}

// signIn signs in as the company's admin at url and returns the access
// and refresh tokens.
func signIn(t *testing.T, url string) (access, refresh string) {
	t.Helper()
	res, err := testhttp.Client.Post(url+"/auth/login", "application/json", strings.NewReader(`{"email":"you@example.com","password":"Change-me-123"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var tokens struct {
		AccessToken  string `json:"accessToken"`
		RefreshToken string `json:"refreshToken"`
	}
	if err := json.Unmarshal(body, &tokens); res.StatusCode != http.StatusOK || err != nil || tokens.AccessToken == "" {
		t.Fatalf("sign-in: %d %s", res.StatusCode, body)
	}
	return tokens.AccessToken, tokens.RefreshToken
}

// admin rotate-keys with a company whose sealed API key does not open
// (garbage in the store) goes on: that sealed copy is kept as it is and the
// command names the company, exit 0; the other company's key is re-sealed
// and reads back under the new seal key. The company whose copy was
// unreadable still authenticates with its key, and once it rotates its
// key, GET /account/api-key shows the new one.
func TestAdminRotateKeysKeepsAnUnopenedSealedKey(t *testing.T) {
	t.Parallel()
	bin, st, acmeKey := companyStore(t)
	out, err := exec.Command(bin, append([]string{"admin", "create-company", "--company", "Globex", "--email", "globex@example.com",
		"--password", "Change-me-123"}, st.args()...)...).Output()
	if err != nil {
		t.Fatalf("create-company: %v", err)
	}
	var created struct {
		APIKey string `json:"apiKey"`
	}
	if err := json.Unmarshal(out, &created); err != nil || created.APIKey == "" {
		t.Fatalf("create-company printed %q (%v)", out, err)
	}
	globexKey := created.APIKey

	garbage := []byte("not a sealed key, not under any seal key at all")
	b := openTestBackend(t, st)
	ids, err := b.CompanyIDs()
	if err != nil || len(ids) != 2 {
		t.Fatalf("companies: %v (%v)", ids, err)
	}
	var acme store.Company
	for _, id := range ids {
		if c, err := b.Company(id); err == nil && c.Name == "Acme" {
			acme = c
		}
	}
	if acme.ID == 0 {
		t.Fatal("no company Acme")
	}
	if _, err := b.UpdateCompany(acme.ID, func(c *store.Company) error {
		c.APIKeySealed = garbage
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.Close()

	cmd := exec.Command(bin, append([]string{"admin", "rotate-keys"}, st.args()...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rotate-keys with one sealed key that does not open: %v %q %q, want exit 0", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{account.SealSecret, "Re-sealed 1 company's API key",
		fmt.Sprintf("Company %d (%q): its API key's stored copy could not be opened before this rotation", acme.ID, "Acme"),
		"GET /account/api-key fails until the company rotates its key"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("rotate-keys printed no %q:\n%s", want, stdout.String())
		}
	}

	b = openTestBackend(t, st)
	if c, err := b.Company(acme.ID); err != nil || !bytes.Equal(c.APIKeySealed, garbage) {
		t.Fatalf("Acme's sealed key after the rotation: %q (%v), want it kept as it was", c.APIKeySealed, err)
	}
	b.Close()

	srv := startServer(t, bin, st)
	showKey := func(key string) (int, string) {
		code, body := get(t, srv.url+"/account/api-key", key)
		var shown struct {
			APIKey string `json:"apiKey"`
		}
		_ = json.Unmarshal(body, &shown)
		return code, shown.APIKey
	}
	if code, shown := showKey(globexKey); code != 200 || shown != globexKey {
		t.Fatalf("GET /account/api-key of Globex after the rotation: %d %q, want 200 and its key", code, shown)
	}
	if code, body := get(t, srv.url+"/company", acmeKey); code != 200 {
		t.Fatalf("GET /company with Acme's key after the rotation: %d %s, want 200 (the key authenticates by its hash)", code, body)
	}
	if code, body := get(t, srv.url+"/account/api-key", acmeKey); code != 409 || !strings.Contains(string(body), `"error":"conflict"`) || !strings.Contains(string(body), "POST /account/api-key/rotate") {
		t.Fatalf("GET /account/api-key of Acme with its sealed copy unreadable: %d %s, want 409 conflict naming the rotation", code, body)
	}
	res, body := post(t, srv.url+"/account/api-key/rotate", acmeKey, "")
	var rotated struct {
		APIKey string `json:"apiKey"`
	}
	if err := json.Unmarshal(body, &rotated); res.StatusCode != 200 || err != nil || rotated.APIKey == "" {
		t.Fatalf("POST /account/api-key/rotate of Acme: %d %s", res.StatusCode, body)
	}
	if code, shown := showKey(rotated.APIKey); code != 200 || shown != rotated.APIKey {
		t.Fatalf("GET /account/api-key of Acme after it rotated its key: %d %q, want 200 and the new key", code, shown)
	}
	stopServer(t, srv)
}
