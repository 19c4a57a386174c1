package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/testhttp"
)

// postConcurrently makes n POSTs of path at once (body(i) each) and
// returns their statuses and Retry-After headers; safe off the test's
// goroutine.
func (e *env) postConcurrently(key, path string, n int, body func(i int) map[string]any) (statuses []int, retry []string) {
	e.t.Helper()
	statuses, retry = make([]int, n), make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw, _ := json.Marshal(body(i))
			req, err := http.NewRequest("POST", e.url+path, bytes.NewReader(raw))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			res, err := testhttp.Client.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			res.Body.Close()
			statuses[i], retry[i] = res.StatusCode, res.Header.Get("Retry-After")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			e.t.Fatal(err)
		}
	}
	return statuses, retry
}

func tally(statuses []int) map[int]int {
	out := map[int]int{}
	for _, s := range statuses {
		out[s]++
	}
	return out
}

func (e *env) setCaps(key, fp string, sims ...map[string]any) resp {
	e.t.Helper()
	r := e.do(call{method: "PUT", path: "/device/" + fp + "/caps", token: key, body: map[string]any{"sims": sims}})
	e.want(r, http.StatusOK, "")
	return r
}

func simUse(r resp, slot string) map[string]any {
	for _, s := range r.Body["sims"].([]any) {
		if m := s.(map[string]any); m["slot"] == slot {
			return m
		}
	}
	return nil
}

// A SIM's daily cap refuses at the exact count however many sends race,
// with Retry-After until midnight UTC; the month's cap carries over days;
// a send that names the device is capped as a pool's would be.
func TestSIMCapsExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "cap-1")
	e.setCaps(a.apiKey, "cap-1", map[string]any{"slot": "SIM1", "per_day": 10, "per_month": 12})

	st, retry := e.postConcurrently(a.apiKey, "/chat/send", 30, func(i int) map[string]any {
		return sendBody("cap-1", fmt.Sprintf("+1555700%04d", i), "hi", "")
	})
	if got := tally(st); got[200] != 10 || got[429] != 20 {
		t.Fatalf("30 racing sends under a cap of 10: got %v, want 10 accepted and 20 refused", got)
	}
	for i, s := range st {
		if s == 429 && retry[i] != strconv.Itoa(14*3600) {
			t.Fatalf("Retry-After %q at 10:00 UTC, want %d (until midnight)", retry[i], 14*3600)
		}
	}
	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("cap-1", "+15557001111", "x", "")})
	e.want(r, http.StatusTooManyRequests, "sim_capped")
	if r.str("field") != "sim_slot" {
		t.Errorf("got field %q, want sim_slot", r.str("field"))
	}
	// SIM2 has no caps.
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("cap-1", "+15557001111", "x", "SIM2")}), http.StatusOK, "")
	use := simUse(e.do(call{method: "GET", path: "/device/cap-1/caps", token: a.apiKey}), "SIM1")
	if use["sent_today"].(float64) != 10 || use["sent_this_month"].(float64) != 10 || use["per_day"].(float64) != 10 || use["recipients_per_day"] != nil {
		t.Fatalf("caps and use %v, want 10 of 10 today", use)
	}

	// The next day: two more fit the month's 12.
	e.clock.Advance(14 * time.Hour)
	st, retry = e.postConcurrently(a.apiKey, "/chat/send", 5, func(i int) map[string]any {
		return sendBody("cap-1", fmt.Sprintf("+1555710%04d", i), "hi", "")
	})
	if got := tally(st); got[200] != 2 || got[429] != 3 {
		t.Fatalf("the next day under a month's cap of 12: got %v, want 2 accepted", got)
	}
	for i, s := range st {
		if s == 429 && retry[i] != strconv.Itoa(8*24*3600) { // Nov 23 00:00 to Dec 1
			t.Fatalf("month's Retry-After %q, want %d", retry[i], 8*24*3600)
		}
	}
	// A bulk send that does not fit is refused whole.
	e.setCaps(a.apiKey, "cap-1", map[string]any{"slot": "SIM2", "per_day": 3})
	msgs := []any{}
	for i := range 4 {
		msgs = append(msgs, map[string]any{"phone": fmt.Sprintf("+1555720%04d", i), "message": "b"})
	}
	b := e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: map[string]any{"device_fingerprint": "cap-1", "sim_slot": "SIM2", "messages": msgs}})
	e.want(b, http.StatusTooManyRequests, "sim_capped")
	if use := simUse(e.do(call{method: "GET", path: "/device/cap-1/caps", token: a.apiKey}), "SIM2"); use["sent_today"].(float64) != 0 {
		t.Fatalf("a refused bulk counted: %v", use)
	}
	e.want(e.do(call{method: "POST", path: "/chat/send-bulk", token: a.apiKey, body: map[string]any{"device_fingerprint": "cap-1", "sim_slot": "SIM2", "messages": msgs[:3]}}), http.StatusOK, "")
}

// The recipients cap counts distinct recipients a day: racing sends to
// new recipients stop at the cap; known recipients still get theirs.
func TestSIMRecipientsCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "rc-1")
	e.setCaps(a.apiKey, "rc-1", map[string]any{"slot": "SIM1", "recipients_per_day": 4})
	// 20 racing sends to 8 recipients, 2..3 each: exactly 4 recipients get through.
	st, _ := e.postConcurrently(a.apiKey, "/chat/send", 20, func(i int) map[string]any {
		return sendBody("rc-1", fmt.Sprintf("+1555800%04d", i%8), "hi", "")
	})
	got := tally(st)
	use := simUse(e.do(call{method: "GET", path: "/device/rc-1/caps", token: a.apiKey}), "SIM1")
	if use["recipients_today"].(float64) != 4 || float64(got[200]) != use["sent_today"].(float64) || got[200]+got[429] != 20 {
		t.Fatalf("statuses %v, use %v: want 4 recipients and every accepted send counted", got, use)
	}
	// Whoever got in may get more today; a fifth recipient may not.
	var in string
	for i := range 8 {
		to := fmt.Sprintf("+1555800%04d", i)
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: sendBody("rc-1", to, "again", "")})
		if r.Status == http.StatusOK {
			in = to
		} else {
			e.want(r, http.StatusTooManyRequests, "sim_capped")
		}
	}
	if in == "" {
		t.Fatal("no recipient of the four could be sent to again")
	}
	if use := simUse(e.do(call{method: "GET", path: "/device/rc-1/caps", token: a.apiKey}), "SIM1"); use["recipients_today"].(float64) != 4 {
		t.Fatalf("known recipients counted again: %v", use)
	}
}

// A sticky pool whose recipient's member is capped tries every member by
// its fallback, that member too: the refusal names each member once, on
// both stores, for a send and for a bulk send (the sticky member was named
// twice, once as the recipient's and once in the fallback's walk).
func TestStickyPoolRefusalNamesEachMemberOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "st-1")
	e.pairPhone(a.apiKey, "st-2")
	e.setCaps(a.apiKey, "st-1", map[string]any{"slot": "SIM1", "per_day": 1})
	e.setCaps(a.apiKey, "st-2", map[string]any{"slot": "SIM1", "per_day": 1})
	e.createPool(a.apiKey, map[string]any{"name": "stick", "strategy": "sticky", "members": members("st-1", "SIM1", "st-2", "SIM1")})
	for _, phone := range []string{"+15559100001", "+15559100002"} {
		r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: map[string]any{"pool": "stick", "phone": phone, "message": "hi"}})
		e.want(r, http.StatusOK, "")
	}
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/chat/send", map[string]any{"pool": "stick", "phone": "+15559100001", "message": "again"}},
		{"/chat/send-bulk", map[string]any{"pool": "stick", "messages": []any{map[string]any{"phone": "+15559100002", "message": "again"}}}},
	} {
		r := e.do(call{method: "POST", path: c.path, token: a.apiKey, body: c.body})
		e.want(r, http.StatusTooManyRequests, "pool_capped")
		// The pool is at fault, not a message of the bulk (docs/api.md).
		if f := r.str("field"); f != "pool" {
			t.Errorf("%s: field %q, want pool", c.path, f)
		}
		msg := r.str("message")
		for _, m := range []string{"member 1 (st-1 SIM1)", "member 2 (st-2 SIM1)"} {
			if n := strings.Count(msg, m); n != 1 {
				t.Errorf("%s: the refusal names %s %d times, want once: %s", c.path, m, n, msg)
			}
		}
	}
}

// A pool skips members at their caps; with every member capped it
// answers 429 pool_capped with Retry-After, exactly at the sum of caps.
func TestPoolCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	e.pairPhone(a.apiKey, "pc-1")
	e.pairPhone(a.apiKey, "pc-2")
	e.setCaps(a.apiKey, "pc-1", map[string]any{"slot": "SIM1", "per_day": 3})
	e.setCaps(a.apiKey, "pc-2", map[string]any{"slot": "SIM1", "per_day": 7})
	e.createPool(a.apiKey, map[string]any{"name": "capped", "strategy": "least_loaded", "members": members("pc-1", "SIM1", "pc-2", "SIM1")})
	st, retry := e.postConcurrently(a.apiKey, "/chat/send", 25, func(i int) map[string]any {
		return map[string]any{"pool": "capped", "phone": fmt.Sprintf("+1555900%04d", i), "message": "hi"}
	})
	if got := tally(st); got[200] != 10 || got[429] != 15 {
		t.Fatalf("25 racing pool sends under caps 3 and 7: got %v, want 10 accepted", got)
	}
	for i, s := range st {
		if s == 429 && retry[i] != strconv.Itoa(14*3600) {
			t.Fatalf("Retry-After %q, want %d", retry[i], 14*3600)
		}
	}
	r := e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: map[string]any{"pool": "capped", "phone": "+15559000000", "message": "x"}})
	e.want(r, http.StatusTooManyRequests, "pool_capped")
	for fp, want := range map[string]float64{"pc-1": 3, "pc-2": 7} {
		if use := simUse(e.do(call{method: "GET", path: "/device/" + fp + "/caps", token: a.apiKey}), "SIM1"); use["sent_today"].(float64) != want {
			t.Errorf("%s sent %v today, want %v", fp, use["sent_today"], want)
		}
	}

	// Bad caps name the field; another company's device is 404.
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"sims": []any{}}, "sims"},
		{map[string]any{"sims": []any{map[string]any{"slot": "SIM3"}}}, "sims[0].slot"},
		{map[string]any{"sims": []any{map[string]any{"slot": "SIM1"}, map[string]any{"slot": "SIM1"}}}, "sims[1].slot"},
		{map[string]any{"sims": []any{map[string]any{"slot": "SIM1", "per_day": 0}}}, "sims[0].per_day"},
		{map[string]any{"sims": []any{map[string]any{"slot": "SIM2", "per_month": 2000000}}}, "sims[0].per_month"},
		{map[string]any{"sims": []any{map[string]any{"slot": "SIM1", "recipients_per_day": "5"}}}, "sims[0].recipients_per_day"},
	} {
		r := e.do(call{method: "PUT", path: "/device/pc-1/caps", token: a.apiKey, body: c.body})
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != c.field {
			t.Errorf("%v: got field %q, want %q", c.body, r.str("field"), c.field)
		}
	}
	e.want(e.do(call{method: "GET", path: "/device/pc-1/caps", token: b.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "PUT", path: "/device/pc-1/caps", token: b.apiKey, body: map[string]any{"sims": []any{map[string]any{"slot": "SIM1"}}}}), http.StatusNotFound, "not_found")
	// Null caps lift them.
	e.setCaps(a.apiKey, "pc-1", map[string]any{"slot": "SIM1", "per_day": nil})
	e.want(e.do(call{method: "POST", path: "/chat/send", token: a.apiKey, body: map[string]any{"pool": "capped", "phone": "+15559000000", "message": "x"}}), http.StatusOK, "")
}
