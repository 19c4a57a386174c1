package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

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
	res, body := post(t, srv.url+"/auth/login", "", `{"email":"you@example.com","password":"Change-me-123"}`)
	var login struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(body, &login); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("login: %d %s", res.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.url+"/company", strings.NewReader(`{"confirm":"Acme"}`))
	req.Header.Set("Authorization", "Bearer "+login.AccessToken)
	req.Header.Set("Content-Type", "application/json")
	closed, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	closed.Body.Close()
	if closed.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE /company: %d, want 202", closed.StatusCode)
	}
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
