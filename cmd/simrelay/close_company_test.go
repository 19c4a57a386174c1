package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// An owner's closing of the company (DELETE /company) outlives the
// server: the server killed (kill -9) right after the 202 leaves the
// company closing, and the server started again on the store finishes
// its removal, as it finishes one that an earlier run left after a step;
// the other companies stay whole.
func TestClosedCompanyIsFinishedAfterAKill(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	b := openTestBackend(t, st)
	owner, err := b.UserByEmail("you@example.com")
	if err != nil {
		t.Fatal(err)
	}
	acme := owner.CompanyID
	d := conformance.Device(t, b, acme, "fp-closing")
	const many = 5000 // five steps of the removal and more
	for i := 0; i < many; i += 1000 {
		bulk := make([]store.Message, 1000)
		for j := range bulk {
			bulk[j] = store.Message{UUID: fmt.Sprintf("closing-%d-%d", i, j), CompanyID: acme, Device: d.Fingerprint, Channel: "sms",
				Phone: fmt.Sprintf("+1555%07d", j), Text: "one of many", SIMSlot: "SIM1", Segments: 1}
		}
		if _, _, err := b.EnqueueBulk(bulk, store.IdempotencyKey{}, time.Now, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	kept := conformance.FillCompany(t, b)
	// A removal an earlier run left after its first step.
	left := conformance.FillCompany(t, b)
	if _, err := b.MarkCompanyClosing(left.Company.ID, time.Now(), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if r, err := b.RemoveCompanyStep(left.Company.ID, 2); err != nil || r.Done {
		t.Fatalf("a first step: %+v (%v)", r, err)
	}
	b.Close()

	srv := startServer(t, bin, st)
	closeCompany(t, srv.url, "you@example.com", "Acme")
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()

	again := startServer(t, bin, st)
	if code, body := get(t, again.url+"/company", apiKey); code != http.StatusUnauthorized {
		t.Errorf("the closed company's API key after the restart: %d %s, want 401", code, body)
	}
	for _, id := range []uint64{acme, left.Company.ID} {
		removed := regexp.MustCompile(fmt.Sprintf(`company removed.*company_id=%d\b`, id))
		poll.Until(t, fmt.Sprintf("company %d removed", id), func() bool {
			return removed.MatchString(srv.stderr.String()) || removed.MatchString(again.stderr.String())
		})
	}
	// Nothing failed: the metrics an operator alerts on say so.
	if code, body := get(t, again.url+"/metrics", ""); code != http.StatusOK ||
		!strings.Contains(string(body), "\nsimrelay_company_removals_failing 0\n") || !strings.Contains(string(body), "\nsimrelay_company_removal_failures_total 0\n") {
		t.Errorf("/metrics: %d\n%s", code, grepLines(string(body), "simrelay_company_removal"))
	}
	_ = again.cmd.Process.Kill()
	_ = again.cmd.Wait()

	b = openTestBackend(t, st)
	defer b.Close()
	if _, err := b.Company(acme); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the closed company after the restart: %v, want ErrNotFound", err)
	}
	if _, err := b.UserByEmail("you@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the closed company's owner: %v, want ErrNotFound", err)
	}
	if ids, err := b.ClosingCompanies(); err != nil || len(ids) != 0 {
		t.Errorf("closing companies: %v (%v), want none", ids, err)
	}
	conformance.CheckRemoved(t, b, left)
	conformance.CheckKept(t, b, kept)
}

// closeCompany signs in at the server at url as the admin of email
// (createCompany's password) and closes the company named name: DELETE
// /company answered 202.
func closeCompany(t *testing.T, url, email, name string) {
	t.Helper()
	res, body := post(t, url+"/auth/login", "", fmt.Sprintf(`{"email":%q,"password":"Change-me-123"}`, email))
	var login struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(body, &login); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("login: %d %s", res.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodDelete, url+"/company", strings.NewReader(fmt.Sprintf(`{"confirm":%q}`, name)))
	req.Header.Set("Authorization", "Bearer "+login.AccessToken)
	req.Header.Set("Content-Type", "application/json")
	closed, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(closed.Body)
	closed.Body.Close()
	if closed.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE /company at %s: %d %s, want 202", url, closed.StatusCode, raw)
	}
}

// A company closed on node a of a cluster (one PostgreSQL database, one
// NATS bus) is closed on node b too: b refuses its API key at once,
// though b read it just before and its cache keeps a key up to 10 s; the
// company's phone linked to b is closed with 4503 and its reconnection to
// b refused (401); its phone on a is closed too; the removal ends; and
// another company's phone linked to b and its key on b are untouched.
func TestClosingReachesEveryNode(t *testing.T) {
	clusterTest(t)
	bin, db, st, apiKey, nats := clusterParts(t)
	otherOut, err := exec.Command(bin, append([]string{"admin", "create-company", "--company", "Other", "--email", "who@other.example", "--password", "Change-me-123"}, st.args()...)...).Output()
	var other struct {
		APIKey string `json:"apiKey"`
	}
	if err != nil || json.Unmarshal(otherOut, &other) != nil || other.APIKey == "" {
		t.Fatalf("create-company Other: %q (%v)", otherOut, err)
	}
	node := func(name string, st testStore) *server {
		return startServer(t, bin, st, "--node-name", name, "--nats-url", nats.ClientURL(), "--link-sweep", "300ms")
	}
	a := node("a", st)
	b := node("b", testStore{dir: t.TempDir(), databaseURL: db})
	register := func(key, fp string) string {
		t.Helper()
		reg := pairDevice(t, a.url, key, fp)
		return reg.DeviceToken
	}
	onBToken := register(apiKey, "closing-on-b")
	onB := linkRouted(t, b.url, onBToken)
	onA := linkRouted(t, a.url, register(apiKey, "closing-on-a"))
	kept := linkRouted(t, b.url, register(other.APIKey, "kept-on-b"))
	// b reads the key now, and would keep it in its cache.
	if code, body := get(t, b.url+"/company", apiKey); code != http.StatusOK {
		t.Fatalf("GET /company on b: %d %s", code, body)
	}

	closeCompany(t, a.url, "you@example.com", "Acme")
	if code, body := get(t, b.url+"/company", apiKey); code != http.StatusUnauthorized {
		t.Errorf("the closed company's API key on b right after the 202: %d %s, want 401", code, body)
	}
	poll.Within(t, 10*time.Second, "the phone on b closed with 4503", func() bool { return onB.closedWith(proto.CloseDeviceGone) })
	poll.Within(t, 10*time.Second, "the phone on a closed with 4503", func() bool { return onA.closedWith(proto.CloseDeviceGone) })
	ws, res, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(b.url, "http")+"/device/ws",
		&websocket.DialOptions{HTTPClient: testhttp.Client, HTTPHeader: http.Header{"Authorization": {"Bearer " + onBToken}}})
	if err == nil {
		ws.CloseNow()
		t.Error("the closed company's phone linked to b again")
	} else if res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the closed company's phone dialing b: %v, want 401", err)
	}
	bk := openTestBackend(t, st)
	defer bk.Close()
	poll.Within(t, 30*time.Second, "the company removed", func() bool {
		ids, err := bk.ClosingCompanies()
		return err == nil && len(ids) == 0
	})
	if !kept.ph.Connected() || kept.closedWith(proto.CloseDeviceGone) {
		t.Error("the other company's phone on b lost its link")
	}
	if code, body := get(t, b.url+"/company", other.APIKey); code != http.StatusOK {
		t.Errorf("the other company's key on b: %d %s", code, body)
	}
}
