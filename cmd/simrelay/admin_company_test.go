package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// admin delete-company removes a company with every record of it, once
// --confirm names it and no Stripe subscription of it is live; a refused
// run removes nothing; a run stopped after a step is finished by the next
// one; the other companies stay as they were.
func TestAdminDeleteCompany(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	acmeID, _ := adminCompany(t, func(args ...string) (int, string, string) { return st.admin(t, args...) }, "Acme", "you@example.com")
	b := openTestBackend(t, st)
	gone := filledWith(t, b, func(sub *store.Subscription) { sub.Status = "past_due" })
	kept := conformance.FillCompany(t, b)
	b.Close()
	id, name := fmt.Sprint(gone.Company.ID), gone.Company.Name

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--company", id}, 2, "--confirm: the company's name is required"},
		{[]string{"--confirm", name}, 2, "--company: the company's id is required"},
		{[]string{"--company", id, "--confirm", strings.ToLower(name)}, 2, fmt.Sprintf("--confirm %q is not the name of company %s, which is %q: nothing was removed", strings.ToLower(name), id, name)},
		{[]string{"--company", id, "--confirm", name + " "}, 2, "is not the name of company"},
		{[]string{"--company", "999999", "--confirm", name}, 1, "no company 999999"},
		{[]string{"--company", id, "--confirm", name}, 1, "pays through the Stripe subscription sub_fill_"},
	} {
		code, out, errOut := st.admin(t, append([]string{"delete-company"}, c.args...)...)
		if code != c.code || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("delete-company %v: exit %d %q %q, want %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
	b = openTestBackend(t, st)
	conformance.CheckKept(t, b, gone)
	// Stripe's cancellation arrives; then a run stopped after its first
	// step (a crash, Ctrl-C) leaves the company for the next run.
	// A checkout expired by now refuses nothing.
	if err := setSubscription(b, gone.Company.ID, func(sub *store.Subscription) {
		sub.Status = "canceled"
		sub.Checkout = &store.Checkout{SessionID: "cs_test_gone", URL: "https://checkout.stripe.com/c/pay/cs_test_gone", PlanID: "pro", ExpiresAt: time.Now().Add(-time.Minute)}
	}); err != nil {
		t.Fatal(err)
	}
	if r, err := b.RemoveCompanyStep(gone.Company.ID, 2); err != nil || r.Done {
		t.Fatalf("a first step: %+v (%v)", r, err)
	}
	b.Close()
	if !storetest.Postgres() {
		// Ctrl-C before a step: it stops there, saying so.
		stoppedBeforeAStep(t, st, id, name)
	}

	code, out, errOut := st.admin(t, "delete-company", "--company", id, "--confirm", name)
	if code != 0 {
		t.Fatalf("delete-company: exit %d %q %q, want 0", code, out, errOut)
	}
	var printed struct {
		CompanyID uint64 `json:"companyId"`
		Deleted   bool   `json:"deleted"`
		Messages  int64  `json:"messages"`
		Records   int64  `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &printed); err != nil || printed.CompanyID != gone.Company.ID || !printed.Deleted || printed.Records == 0 {
		t.Fatalf("delete-company printed %q (%v)", out, err)
	}
	b = openTestBackend(t, st)
	conformance.CheckRemoved(t, b, gone)
	conformance.CheckKept(t, b, kept)
	if _, err := b.Company(acmeID); err != nil {
		t.Errorf("company %d after another's removal: %v", acmeID, err)
	}
	b.Close()
	if code, _, errOut := st.admin(t, "delete-company", "--company", id, "--confirm", name); code != 1 || !strings.Contains(errOut, "no company "+id) {
		t.Errorf("delete-company again: exit %d %q, want 1 and no company %s", code, errOut, id)
	}
}

// A company whose Stripe Checkout Session can still be paid is refused,
// with the session and its expiry, until the session expires, or the
// operator names it in --expired-checkout once it is expired in Stripe's
// dashboard: paid after the removal, it would make a subscription that
// Stripe bills with no company to it.
func TestAdminDeleteCompanyOpenCheckout(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	b := openTestBackend(t, st)
	expires := time.Now().Add(20 * time.Hour).UTC().Truncate(time.Second)
	f := filledWith(t, b, func(sub *store.Subscription) {
		sub.Checkout = &store.Checkout{SessionID: "cs_test_open", URL: "https://checkout.stripe.com/c/pay/cs_test_open", PlanID: "pro", ExpiresAt: expires}
	})
	b.Close()
	id, name := fmt.Sprint(f.Company.ID), f.Company.Name
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 1, "Stripe Checkout Session cs_test_open, which can be paid until " + expires.Format(time.RFC3339)},
		{nil, 1, "expire it in the Stripe dashboard"},
		{[]string{"--expired-checkout", "cs_test_other"}, 1, "--expired-checkout cs_test_other is not the company's checkout, cs_test_open"},
	} {
		code, out, errOut := st.admin(t, append([]string{"delete-company", "--company", id, "--confirm", name}, c.args...)...)
		if code != c.code || out != "" || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "nothing was removed") {
			t.Errorf("delete-company %v: exit %d %q %q, want %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
	b = openTestBackend(t, st)
	conformance.CheckKept(t, b, f)
	b.Close()
	if code, out, errOut := st.admin(t, "delete-company", "--company", id, "--confirm", name, "--expired-checkout", "cs_test_open"); code != 0 {
		t.Fatalf("delete-company --expired-checkout: exit %d %q %q, want 0", code, out, errOut)
	}
	b = openTestBackend(t, st)
	conformance.CheckRemoved(t, b, f)
	b.Close()
}

// A company whose Stripe checkout is being opened (billing's claim on it,
// held up to store.CheckoutClaimTTL) is refused, removing nothing: the
// checkout that request opens could be paid after the removal. A claim
// that lapsed refuses nothing. A run that began (the company marked
// closing) refuses a claim taken after it, as for a company that is gone,
// and the next run finishes the removal.
func TestAdminDeleteCompanyCheckoutBeingOpened(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	b := openTestBackend(t, st)
	claimed := func(at time.Time) func(*store.Subscription) {
		return func(sub *store.Subscription) {
			sub.Checkout = &store.Checkout{Claim: "claim-of-a-subscribe", ClaimedAt: at}
		}
	}
	f := filledWith(t, b, claimed(time.Now()))
	claim := func(at time.Time) error { return setSubscription(b, f.Company.ID, claimed(at)) }
	b.Close()
	id, name := fmt.Sprint(f.Company.ID), f.Company.Name
	code, out, errOut := st.admin(t, "delete-company", "--company", id, "--confirm", name)
	if code != 1 || out != "" || !strings.Contains(errOut, "a Stripe checkout is being opened for company "+id) || !strings.Contains(errOut, "nothing was removed") {
		t.Fatalf("delete-company while a checkout is being opened: exit %d %q %q, want 1, the checkout being opened, nothing removed", code, out, errOut)
	}
	b = openTestBackend(t, st)
	conformance.CheckKept(t, b, f)
	if co, err := b.Company(f.Company.ID); err != nil || !co.ClosingAt.IsZero() {
		t.Fatalf("the company after a refused run: %+v (%v), want it open", co, err)
	}
	// The request that claimed stopped midway: its claim lapses.
	if err := claim(time.Now().Add(-store.CheckoutClaimTTL - time.Second)); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if !storetest.Postgres() {
		// Ctrl-C before the first step: the removal began, so a claim
		// taken now is refused by the store.
		stoppedBeforeAStep(t, st, id, name)
		b = openTestBackend(t, st)
		if err := claim(time.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a checkout claim after the removal began: %v, want ErrNotFound", err)
		}
		b.Close()
	}
	if code, out, errOut := st.admin(t, "delete-company", "--company", id, "--confirm", name); code != 0 {
		t.Fatalf("delete-company once the claim lapsed: exit %d %q %q, want 0", code, out, errOut)
	}
	b = openTestBackend(t, st)
	conformance.CheckRemoved(t, b, f)
	b.Close()
}

// filledWith fills a company on b (conformance.FillCompany) and sets its
// subscription as set says: the state a delete-company case starts from.
func filledWith(t *testing.T, b store.Backend, set func(*store.Subscription)) conformance.Filled {
	t.Helper()
	f := conformance.FillCompany(t, b)
	if err := setSubscription(b, f.Company.ID, set); err != nil {
		t.Fatal(err)
	}
	return f
}

// setSubscription changes the subscription of company id on b as set says.
func setSubscription(b store.Backend, id uint64, set func(*store.Subscription)) error {
	_, err := b.UpdateSubscription(id, func(sub *store.Subscription) error { set(sub); return nil })
	return err
}

// stoppedBeforeAStep runs delete-company of the company id named name with
// its context ended (Ctrl-C) before the first step: it stops there, exit
// 1, saying how to finish.
func stoppedBeforeAStep(t *testing.T, st testStore, id, name string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	if code := admin(ctx, append([]string{"delete-company", "--company", id, "--confirm", name}, st.args()...), &out, &errb); code != 1 || !strings.Contains(errb.String(), "run the same command again to finish") {
		t.Fatalf("delete-company stopped: exit %d %q, want 1 and how to finish", code, errb.String())
	}
}

// behindDB is a database whose server's clock is an hour behind this
// machine's: this machine's clock is the one that is off.
type behindDB struct{ store.Backend }

func (behindDB) DatabaseTime() (time.Time, error) { return time.Now().Add(-time.Hour), nil }

// delete-company times a checkout's claim and its end by the database
// server's clock, by which the nodes stamp them: run from a machine whose
// clock is an hour ahead, it still refuses a company whose checkout a
// subscribe began opening a moment ago, and one whose checkout can be paid
// for another half hour. Before, it took the claim for lapsed and the
// checkout for expired, and removed the company.
func TestAdminDeleteCompanyUsesTheDatabaseClock(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	b := openTestBackend(t, st)
	defer b.Close()
	dbNow := time.Now().Add(-time.Hour)
	claimed := filledWith(t, b, func(sub *store.Subscription) {
		sub.Checkout = &store.Checkout{Claim: "claim-of-a-subscribe", ClaimedAt: dbNow}
	})
	payable := filledWith(t, b, func(sub *store.Subscription) {
		sub.Checkout = &store.Checkout{SessionID: "cs_test_open", URL: "https://checkout.stripe.com/c/pay/cs_test_open", PlanID: "pro", ExpiresAt: dbNow.Add(30 * time.Minute)}
	})
	for _, c := range []struct {
		f    conformance.Filled
		want string
	}{
		{claimed, "a Stripe checkout is being opened"},
		{payable, "Stripe Checkout Session cs_test_open, which can be paid until"},
	} {
		var out bytes.Buffer
		err := deleteCompany(context.Background(), behindDB{b}, c.f.Company.ID, c.f.Company.Name, "", &out)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was removed") {
			t.Errorf("company %d: %v (%q), want %q, nothing removed", c.f.Company.ID, err, out.String(), c.want)
		}
		conformance.CheckKept(t, b, c.f)
	}
}
