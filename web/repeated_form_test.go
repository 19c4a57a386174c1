package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// postForm sends body as a plain form post (no JSON asked for, as a
// browser without the script), with the Content-Type lines given.
func (b *browser) postForm(path, body string, contentTypes ...string) page {
	b.e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.e.url+path, strings.NewReader(body))
	for _, ct := range contentTypes {
		req.Header.Add("Content-Type", ct)
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	return read(b.e.t, res)
}

// TestConsoleFormRefusesRepeatedContentType: a console form post with two
// Content-Type lines that differ is the console's 400 page naming the
// header, as the API refuses it, and changes nothing: the form was read
// by the first line alone.
func TestConsoleFormRefusesRepeatedContentType(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	body := "csrf=" + url.QueryEscape(b.csrf) + "&phone=%2B15550100001"
	p := b.postForm("/console/opt-outs", body, "application/x-www-form-urlencoded", "text/plain")
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "more than one Content-Type header") {
		t.Errorf("two Content-Type lines: %d %s, want the console's 400 page naming the header", p.status, p.body)
	}
	if list, err := e.sms.OptOuts(t.Context(), 1, "", 10); err != nil || len(list) != 0 {
		t.Fatalf("the refused post listed %+v (%v)", list, err)
	}
	p = b.postForm("/console/opt-outs", body, "application/x-www-form-urlencoded", "application/x-www-form-urlencoded")
	if p.status != http.StatusSeeOther {
		t.Errorf("the same Content-Type twice: %d %s, want the form's redirect", p.status, p.body)
	}
	if list, err := e.sms.OptOuts(t.Context(), 1, "", 10); err != nil || len(list) != 1 {
		t.Errorf("listed %+v (%v), want the one number", list, err)
	}
}
