package httpapi_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
)

const testAdminToken = "op_0123456789abcdefghijklmnopqrstuvwxyz"

func withAdminToken(c *httpapi.Config) { c.AdminToken = testAdminToken }

// TestBackupIsTheOperatorsAlone: the whole store (every company, the server's
// keys) goes only to the operator's token; everyone else, a company admin
// and its API key included, sees the unknown-route 404.
func TestBackupIsTheOperatorsAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy, withAdminToken)
	a := e.newCompany("Acme", "owner@acme.test")
	m := usersJoin(t, e, a.access, "Mia", "mia@acme.test", "member")
	stranger := e.newCompany("Stranger", "who@stranger.test")
	e.want(e.do(call{method: "PATCH", path: "/company", token: a.access, body: map[string]any{"name": "Acme Backup"}}), http.StatusOK, "")

	unknown := e.do(call{method: "GET", path: "/admin/nothing-here"})
	for _, tc := range []struct{ name, token string }{
		{"company admin", a.access}, {"API key", a.apiKey}, {"member", m.access},
		{"signed-up stranger", stranger.access}, {"stranger's API key", stranger.apiKey},
		{"no credential", ""}, {"wrong token", testAdminToken + "x"}, {"prefix of the token", testAdminToken[:32]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(call{method: "GET", path: "/admin/backup", token: tc.token})
			e.want(r, http.StatusNotFound, "not_found")
			if want := strings.Replace(unknown.str("message"), "/admin/nothing-here", "/admin/backup", 1); r.str("message") != want {
				t.Errorf("message: got %q, want the unknown route's %q", r.str("message"), want)
			}
		})
	}

	// Other methods answer as on an unknown route too, token or not: no
	// 405, no list of methods.
	for _, method := range []string{"POST", "PUT", "DELETE", "PATCH", "OPTIONS"} {
		for _, token := range []string{"", testAdminToken} {
			r := e.do(call{method: method, path: "/admin/backup", token: token})
			e.want(r, http.StatusNotFound, "not_found")
			if r.Header.Get("Allow") != "" {
				t.Errorf("%s /admin/backup: Allow %q, want none", method, r.Header.Get("Allow"))
			}
		}
	}

	r := e.do(call{method: "GET", path: "/admin/backup", token: testAdminToken})
	if storetest.Postgres() {
		// The database is backed up with pg_dump, not through a node.
		e.want(r, http.StatusConflict, "backup_external")
	} else {
		if r.Status != http.StatusOK {
			t.Fatalf("operator: got %d %s, want 200", r.Status, r.Raw)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/octet-stream" {
			t.Errorf("Content-Type: got %q, want application/octet-stream", ct)
		}
		if disp, params, err := mime.ParseMediaType(r.Header.Get("Content-Disposition")); err != nil || disp != "attachment" || params["filename"] == "" {
			t.Errorf("Content-Disposition: got %q (%v), want an attachment with a filename", r.Header.Get("Content-Disposition"), err)
		}
		if got := r.Header.Get("Content-Length"); got != fmt.Sprint(len(r.Raw)) {
			t.Errorf("Content-Length: got %q, want %d", got, len(r.Raw))
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, boltstore.FileName), r.Raw, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := boltstore.Open(dir, boltstore.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("open the backup: got %v, want a valid store", err)
		}
		defer st.Close()
		if co, err := st.Company(uint64(a.id)); err != nil || co.Name != "Acme Backup" {
			t.Errorf("company in the backup: got %+v, %v, want Acme Backup", co, err)
		}
		// The snapshot's temporary file is gone from the data directory.
		entries, _ := os.ReadDir(filepath.Dir(e.store.(*boltstore.Store).Path()))
		for _, de := range entries {
			if de.Name() != boltstore.FileName {
				t.Errorf("left in the data directory after the backup: %s", de.Name())
			}
		}
	}
	// The operator's token is no account's credential.
	e.want(e.do(call{method: "GET", path: "/company", token: testAdminToken}), http.StatusUnauthorized, "unauthorized")

	// No token configured: the route is off for everyone.
	off := newEnv(t, roomy)
	off.want(off.do(call{method: "GET", path: "/admin/backup", token: testAdminToken}), http.StatusNotFound, "not_found")
	off.want(off.do(call{method: "GET", path: "/admin/backup"}), http.StatusNotFound, "not_found")
}

// TestBackupGuessesSpendTheCredentialWindow: wrong tokens count in the
// per-IP credential window, so the route is no oracle for the token.
func TestBackupGuessesSpendTheCredentialWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAdminToken, func(c *httpapi.Config) {
		c.GeneralRate = pacing.Rate{Limit: 1000, Window: time.Minute}
		c.AuthRate = pacing.Rate{Limit: 3, Window: 15 * time.Minute}
	})
	for i := range 3 {
		e.want(e.do(call{method: "GET", path: "/admin/backup", token: fmt.Sprintf("guess-%d-0123456789abcdefghijklmnopq", i)}), http.StatusNotFound, "not_found")
	}
	r := e.do(call{method: "GET", path: "/admin/backup", token: "guess-4-0123456789abcdefghijklmnopq"})
	e.want(r, http.StatusTooManyRequests, "rate_limited")
	if r.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	// The window is the client's: the right token from the same address waits too.
	e.want(e.do(call{method: "GET", path: "/admin/backup", token: testAdminToken}), http.StatusTooManyRequests, "rate_limited")
}

// TestCompanyExport: an admin gets the own company's data and nothing of
// another company's or of the server's secrets.
func TestCompanyExport(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Beta Secret Co", "owner@beta.test")
	usersJoin(t, e, a.access, "Mia", "mia@acme.test", "member")
	usersInvite(t, e, a.access, "Ivy", "ivy@acme.test", "member")
	usersJoin(t, e, b.access, "Bob", "bob@beta.test", "member")
	e.pairPhone(a.apiKey, "acme-phone")
	e.pairPhone(b.apiKey, "beta-phone")
	e.whPut(a.apiKey, map[string]any{"url": "https://hooks.example.com/acme"})
	e.whPut(b.apiKey, map[string]any{"url": "https://hooks.example.com/beta"})

	// Interleaved history, more than a page and more than one scan window per company.
	const perCompany = 2600
	now := e.clock.Now()
	var msgs []store.Message
	for i := range perCompany {
		for _, co := range []struct {
			id     float64
			device string
			tag    string
		}{{a.id, "acme-phone", "acme"}, {b.id, "beta-phone", "beta"}} {
			msgs = append(msgs, store.Message{UUID: fmt.Sprintf("%s-%06d", co.tag, i), CompanyID: uint64(co.id), Device: co.device, Direction: store.Outbound,
				Channel: "sms", Phone: fmt.Sprintf("+1555010%04d", i%50), Text: fmt.Sprintf("%s text %d", co.tag, i), SIMSlot: "SIM1",
				Status: store.MsgDelivered, Segments: 1, CreatedAt: now, UpdatedAt: now})
		}
	}
	if err := e.store.ImportMessages(msgs); err != nil {
		t.Fatal(err)
	}

	r := e.do(call{method: "GET", path: "/company/export", token: a.access})
	e.want(r, http.StatusOK, "")
	var doc struct {
		Format  string `json:"format"`
		Company struct {
			ID   float64 `json:"id"`
			Name string  `json:"name"`
		} `json:"company"`
		APIKey   map[string]any   `json:"apiKey"`
		Users    []map[string]any `json:"users"`
		Devices  []map[string]any `json:"devices"`
		Webhooks struct {
			Entries []map[string]any `json:"entries"`
		} `json:"webhooks"`
		Conversations []map[string]any `json:"conversations"`
		Messages      []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(r.Raw, &doc); err != nil {
		t.Fatalf("the export is not one JSON document: %v", err)
	}
	if doc.Format == "" || doc.Company.ID != a.id || doc.Company.Name != "Acme" {
		t.Fatalf("company: got %+v (format %q), want Acme's", doc.Company, doc.Format)
	}
	var emails []string
	for _, u := range doc.Users {
		emails = append(emails, u["email"].(string))
	}
	if got := strings.Join(emails, ","); got != "owner@acme.test,mia@acme.test,ivy@acme.test" {
		t.Errorf("users: got %s, want Acme's three", got)
	}
	if len(doc.Devices) != 1 || doc.Devices[0]["device_fingerprint"] != "acme-phone" {
		t.Errorf("devices: got %v, want acme-phone only", doc.Devices)
	}
	if len(doc.Webhooks.Entries) != 1 || doc.Webhooks.Entries[0]["url"] != "https://hooks.example.com/acme" {
		t.Errorf("webhooks: got %v, want Acme's entry", doc.Webhooks.Entries)
	}
	if len(doc.Conversations) != 50 {
		t.Errorf("conversations: got %d, want 50", len(doc.Conversations))
	}
	if len(doc.Messages) != perCompany {
		t.Fatalf("messages: got %d, want %d", len(doc.Messages), perCompany)
	}
	for i, m := range doc.Messages {
		if want := fmt.Sprintf("acme text %d", i); m["message"] != want {
			t.Fatalf("message %d: got %v, want %q in id order", i, m["message"], want)
		}
	}

	// Nothing of B, no hashes, no credentials, no server secret, in any encoding.
	text := string(r.Raw)
	forbidden := map[string]string{
		"company B's name": "Beta Secret Co", "B's owner": "owner@beta.test", "B's member": "bob@beta.test",
		"B's device": "beta-phone", "B's messages": "beta text", "B's webhook": "hooks.example.com/beta",
		"A's API key": a.apiKey, "B's API key": b.apiKey, "A's signing secret": e.whSecret(a.apiKey), "B's signing secret": e.whSecret(b.apiKey),
		"a password hash": "argon2id", "a password hash field": "password", "a token hash field": "token_hash", "a hash field": "hash",
		"API key material": "api_key",
	}
	for _, name := range []string{"jwt-hs256", "api-key-seal"} {
		secret, err := e.store.Secret(name, 32)
		if err != nil {
			t.Fatal(err)
		}
		forbidden[name+" raw"] = string(secret)
		forbidden[name+" hex"] = hex.EncodeToString(secret)
		forbidden[name+" base64"] = base64.StdEncoding.EncodeToString(secret)
		forbidden[name+" base64url"] = base64.RawURLEncoding.EncodeToString(secret)
	}
	dev, err := e.store.Device("acme-phone")
	if err != nil {
		t.Fatal(err)
	}
	forbidden["A's device token hash (base64)"] = base64.StdEncoding.EncodeToString(dev.TokenHash)
	forbidden["A's device token hash (hex)"] = hex.EncodeToString(dev.TokenHash)
	co, _ := e.store.Company(uint64(a.id))
	forbidden["A's sealed API key"] = base64.StdEncoding.EncodeToString(co.APIKeySealed)
	forbidden["A's API key hash"] = base64.StdEncoding.EncodeToString(co.APIKeyHash)
	keyHash := sha256.Sum256([]byte(a.apiKey))
	forbidden["A's API key hash (hex)"] = hex.EncodeToString(keyHash[:])
	for what, s := range forbidden {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("the export holds %s", what)
		}
	}

	// The API key acts as an admin; a member is refused (TestMemberForbiddenOnAdminRoutes), no credential too.
	e.want(e.do(call{method: "GET", path: "/company/export", token: a.apiKey}), http.StatusOK, "")
	e.want(e.do(call{method: "GET", path: "/company/export"}), http.StatusUnauthorized, "unauthorized")
	// B's export is B's.
	rb := e.do(call{method: "GET", path: "/company/export", token: b.apiKey})
	e.want(rb, http.StatusOK, "")
	if strings.Contains(string(rb.Raw), "owner@acme.test") || strings.Contains(string(rb.Raw), "acme text") {
		t.Error("B's export holds A's data")
	}
}

// The export's devices are as GET /device/list shows them, less what is only
// live state (online, health, queue_depth, last_failures): a phone paired and
// never linked has last_seen_at null in both, not "" in the export.
func TestCompanyExportDevicesAsTheDeviceList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "never-linked")

	l := e.do(call{method: "GET", path: "/device/list", token: a.apiKey})
	e.want(l, http.StatusOK, "")
	var list struct {
		Devices []map[string]any `json:"devices"`
	}
	if err := json.Unmarshal(l.Raw, &list); err != nil || len(list.Devices) != 1 {
		t.Fatalf("device list: %v %s", err, l.Raw)
	}
	r := e.do(call{method: "GET", path: "/company/export", token: a.apiKey})
	e.want(r, http.StatusOK, "")
	var doc struct {
		Devices []map[string]any `json:"devices"`
	}
	if err := json.Unmarshal(r.Raw, &doc); err != nil || len(doc.Devices) != 1 {
		t.Fatalf("export: %v %s", err, r.Raw)
	}
	want := list.Devices[0]
	for _, live := range []string{"online", "health", "queue_depth", "last_failures"} {
		delete(want, live)
	}
	got := doc.Devices[0]
	if v, ok := got["last_seen_at"]; !ok || v != nil {
		t.Errorf("export: last_seen_at of a phone never linked is %#v, want null as GET /device/list answers", v)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("export's device:\n%v\nwant GET /device/list's less its live state:\n%v", got, want)
	}
}

// The export's signingSecretCreatedAt is null while the company has no
// signing secret, as other times not yet set are (last_seen_at), not "",
// which is no time; once the secret is made it is that time, in the API's
// form.
func TestCompanyExportSigningSecretCreatedAt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	created := func() (any, bool) {
		t.Helper()
		r := e.do(call{method: "GET", path: "/company/export", token: a.apiKey})
		e.want(r, http.StatusOK, "")
		var doc struct {
			Webhooks map[string]any `json:"webhooks"`
		}
		if err := json.Unmarshal(r.Raw, &doc); err != nil {
			t.Fatalf("export: %v %s", err, r.Raw)
		}
		v, ok := doc.Webhooks["signingSecretCreatedAt"]
		return v, ok
	}
	if v, ok := created(); !ok || v != nil {
		t.Errorf("signingSecretCreatedAt of a company without a secret: %#v (present %v), want null", v, ok)
	}
	e.whSecret(a.apiKey) // made on first use
	v, ok := created()
	s, _ := v.(string)
	if at, err := time.Parse("2006-01-02T15:04:05.000Z", s); !ok || err != nil || at.IsZero() {
		t.Errorf("signingSecretCreatedAt once the secret is made: %#v, want its time as 2026-11-22T10:04:05.123Z", v)
	}
}

// The public metrics do not tell whether, or how often, the operator took a
// backup, nor that strangers knocked on the route.
func TestBackupStaysOutOfMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy, withAdminToken)
	if storetest.Postgres() {
		e.want(e.do(call{method: "GET", path: "/admin/backup", token: testAdminToken}), http.StatusConflict, "backup_external")
	} else {
		e.want(e.do(call{method: "GET", path: "/admin/backup", token: testAdminToken}), http.StatusOK, "")
	}
	e.want(e.do(call{method: "GET", path: "/admin/backup"}), http.StatusNotFound, "not_found")
	m := e.do(call{method: "GET", path: "/metrics"})
	e.want(m, http.StatusOK, "")
	if strings.Contains(string(m.Raw), "/admin/backup") {
		t.Fatal("/metrics names /admin/backup")
	}
}

// The export carries what the newer features stored - WhatsApp numbers and
// iMessage handles, opt-outs, and the agent fields of messages - and only
// the company's own; a company that never used them gets none of the keys.
func TestCompanyExportOfAgentNumbersAndOptOuts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Beta", "owner@beta.test")
	e.runAgent(e.pairPhone(a.apiKey, "agent-a"), "agent-a", []string{waNumber}, []string{imHandle}, true)
	e.runAgent(e.pairPhone(b.apiKey, "agent-b"), "agent-b", []string{"+15550009999"}, nil, true)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	id := e.waSend(a.apiKey, wa, "+15557654321", "hello").str("id")
	e.eventually("delivered", func() bool {
		return e.do(call{method: "GET", path: "/whatsapp/messages/" + id, token: a.apiKey}).str("status") == "delivered"
	})
	e.want(e.do(call{method: "POST", path: "/opt-outs", token: a.apiKey, body: map[string]any{"phone": "+15551112222"}}), http.StatusCreated, "")

	var doc struct {
		WhatsApp []map[string]any `json:"whatsapp_numbers"`
		IMessage []map[string]any `json:"imessage_handles"`
		OptOuts  []map[string]any `json:"opt_outs"`
		Messages []map[string]any `json:"messages"`
	}
	r := e.do(call{method: "GET", path: "/company/export", token: a.access})
	e.want(r, http.StatusOK, "")
	mustJSON(t, r.Raw, &doc)
	if len(doc.WhatsApp) != 1 || doc.WhatsApp[0]["id"] != wa || doc.WhatsApp[0]["address"] != waNumber || len(doc.IMessage) != 1 || doc.IMessage[0]["address"] != imHandle {
		t.Fatalf("numbers: got %v and %v", doc.WhatsApp, doc.IMessage)
	}
	if len(doc.OptOuts) != 1 || doc.OptOuts[0]["phone"] != "+15551112222" || doc.OptOuts[0]["source"] != "api" {
		t.Fatalf("opt-outs: got %v", doc.OptOuts)
	}
	if len(doc.Messages) != 1 || doc.Messages[0]["number_id"] != wa || doc.Messages[0]["account"] != waNumber || doc.Messages[0]["content_type"] != "text" {
		t.Fatalf("messages: got %v", doc.Messages)
	}
	if strings.Contains(string(r.Raw), "+15550009999") {
		t.Fatal("the export holds another company's number")
	}
	// A company with none of these has none of the keys.
	c := e.newCompany("Plain", "owner@plain.test")
	r = e.do(call{method: "GET", path: "/company/export", token: c.access})
	for _, key := range []string{"whatsapp_numbers", "imessage_handles", "opt_outs", "number_id", "send_at"} {
		if strings.Contains(string(r.Raw), `"`+key+`"`) {
			t.Errorf("a company that never used them: %q in %s", key, r.Raw)
		}
	}
}

// TestOperatorTokenAnswersAsAWrongToken: on a company route the operator's
// token is refused with the very answer a wrong token gets, so no route
// tells whether a guess was the operator's.
func TestOperatorTokenAnswersAsAWrongToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAdminToken)
	for _, path := range []string{"/company", "/users/me", "/chat/devices"} {
		op := e.do(call{method: "GET", path: path, token: testAdminToken})
		wrong := e.do(call{method: "GET", path: path, token: testAdminToken[:len(testAdminToken)-1] + "X"})
		e.want(op, http.StatusUnauthorized, "unauthorized")
		if string(op.Raw) != string(wrong.Raw) || op.Status != wrong.Status {
			t.Errorf("GET %s: the operator's token got %d %s, a wrong token %d %s; want the same answer", path, op.Status, op.Raw, wrong.Status, wrong.Raw)
		}
	}
	// The rate limit too counts it as the wrong token it is there, in the
	// client address's window: counted in a window of its own, the
	// RateLimit-Remaining of its answer told it from a wrong one, at the
	// general limit's pace rather than at the credential window's that the
	// operator's route holds every try to.
	remaining := func(r resp) int {
		n, err := strconv.Atoi(r.Header.Get("RateLimit-Remaining"))
		if err != nil {
			t.Fatalf("RateLimit-Remaining %q: %v", r.Header.Get("RateLimit-Remaining"), err)
		}
		return n
	}
	before := remaining(e.do(call{method: "GET", path: "/company", token: "sk_wrong"}))
	op := remaining(e.do(call{method: "GET", path: "/company", token: testAdminToken}))
	after := remaining(e.do(call{method: "GET", path: "/company", token: "sk_wrong"}))
	if op != before-1 || after != before-2 {
		t.Errorf("RateLimit-Remaining: a wrong token %d, the operator's token %d, a wrong token %d; want one window counting down", before, op, after)
	}
}
