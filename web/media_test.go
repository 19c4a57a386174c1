package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// uploadMedia is an agent's POST /device/media; it returns the file's id.
func (e *env) uploadMedia(token, key, filename, contentType string, body []byte) string {
	e.t.Helper()
	q := url.Values{"key": {key}, "filename": {filename}}
	req, err := http.NewRequest("POST", e.url+"/device/media?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", contentType)
	res, err := testhttp.Client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusCreated {
		e.t.Fatalf("upload: %d %v", res.StatusCode, err)
	}
	return out.ID
}

// TestNumberPageShowsReceivedMedia: a received image is shown inline on
// the number's page and a document is a download link, both served under
// the console's session to the company and to no other.
func TestNumberPageShowsReceivedMedia(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keyA := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.company("Bolt", "bo@bolt.test", "Correct1horse")
	reg, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: e.pairingCode(keyA), DeviceFingerprint: "agent-acme", DeviceName: "Agent", AppVersion: "agent-1", SIMs: []proto.SIM{{Slot: "SIM1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	const own = "+15550100001"
	ph := e.runPhone(reg, proto.Hello{AppVersion: "agent-1", SIMs: []proto.SIM{{Slot: "SIM1"}}, WhatsApp: []proto.WhatsAppNumber{{Phone: own}}}, false)
	wa := e.numberID(1, channel.WhatsApp, own)

	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{3}, 500)...)
	img := e.uploadMedia(reg.DeviceToken, "m1/0", "", "image/png", png)
	doc := e.uploadMedia(reg.DeviceToken, "m1/1", "invoice.pdf", "application/pdf", []byte("%PDF-1.4 the invoice"))
	select {
	case <-ph.Receive(proto.Inbound{ClientID: "m1", Channel: "whatsapp", From: "+15557654321", To: own, Message: "photo and invoice", Media: []string{img, doc}}):
	case <-time.After(10 * time.Second):
		t.Fatal("no inbound_ack")
	}

	ada := e.browser()
	ada.signIn("ada@acme.test", "Correct1horse")
	p := ada.get("/console/numbers/whatsapp/" + wa)
	if p.status != http.StatusOK || !strings.Contains(p.body, `<img src="/console/media/`+img+`" alt="Image received: image/png (516 bytes)"`) ||
		!strings.Contains(p.body, `<a href="/console/media/`+doc+`" download><bdi>invoice.pdf (20 bytes)</bdi></a>`) {
		t.Fatalf("number page: got %d, want the image inline and the document as a download:\n%s", p.status, p.body)
	}
	// The live list's reload carries the same files.
	if j := ada.get("/console/numbers/whatsapp/" + wa + "/messages"); !strings.Contains(j.body, `"url":"/console/media/`+img+`","inline":true`) ||
		!strings.Contains(j.body, `"url":"/console/media/`+doc+`","inline":false`) {
		t.Fatalf("messages JSON: %s", j.body)
	}
	got := ada.get("/console/media/" + img)
	if got.status != http.StatusOK || got.body != string(png) || got.header.Get("Content-Type") != "image/png" ||
		!strings.HasPrefix(got.header.Get("Content-Disposition"), "inline") || !strings.Contains(got.header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("image: got %d %v", got.status, got.header)
	}
	if got := ada.get("/console/media/" + doc); got.status != http.StatusOK || got.header.Get("Content-Disposition") != "attachment; filename=invoice.pdf" {
		t.Fatalf("document: got %d %v", got.status, got.header)
	}
	// A player seeking, or a download resuming, gets the part it asks for.
	req, err := http.NewRequest(http.MethodGet, e.url+"/console/media/"+doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Range", "bytes=9-")
	res, err := ada.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, res); got.status != http.StatusPartialContent || got.body != "the invoice" || got.header.Get("Content-Range") != "bytes 9-19/20" {
		t.Fatalf("a range of the document: got %d %q %v", got.status, got.body, got.header)
	}

	// A file is shown only to a signed-in browser, its cached copy too: the
	// browser may keep it (a 304 spares the body) but asks again before each
	// use, so once the session has ended the answer is the sign-in page, not
	// the file from the cache. (max-age=300 showed it for five minutes after
	// sign-out, on the computer of the next person at it.)
	if cc := got.header.Get("Cache-Control"); cc != "private, no-cache" { // the image's
		t.Errorf("a file's Cache-Control: got %q, want private, no-cache", cc)
	}
	etag := got.header.Get("ETag")
	revalidate := func(b *browser) page {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, e.url+"/console/media/"+img, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("If-None-Match", etag)
		res, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return read(t, res)
	}
	if got := revalidate(ada); got.status != http.StatusNotModified || got.header.Get("Cache-Control") != "private, no-cache" {
		t.Errorf("a cached file asked for again, signed in: got %d, Cache-Control %q; want 304 keeping private, no-cache", got.status, got.header.Get("Cache-Control"))
	}
	leaving := e.browser()
	leaving.signIn("ada@acme.test", "Correct1horse")
	if p := leaving.post("/console/signout", nil); p.status != http.StatusOK {
		t.Fatalf("sign out: got %d %s", p.status, p.body)
	}
	if got := revalidate(leaving); got.status != http.StatusSeeOther || !strings.HasPrefix(got.location, "/console/signin?") {
		t.Errorf("a cached file asked for again after sign-out: got %d to %q, want the redirect to sign in", got.status, got.location)
	}

	// Nobody but the company's members learns whether a file exists:
	// another company's member gets the same 404 page for its files as for
	// an id that names none, and a signed-out visitor is sent to sign in,
	// as from every page, whatever the id.
	bo := e.browser()
	bo.signIn("bo@bolt.test", "Correct1horse")
	none := bo.get("/console/media/med_unknown")
	if !none.errorPage(http.StatusNotFound, "No such file.") {
		t.Fatalf("another company, an unknown file: got %d %s", none.status, none.body)
	}
	for _, id := range []string{img, doc} {
		if got := bo.get("/console/media/" + id); got.status != none.status || got.body != none.body {
			t.Errorf("another company's file %s: got %d, want the 404 page of an unknown id", id, got.status)
		}
	}
	for _, id := range []string{img, doc, "med_unknown"} {
		if got := e.browser().get("/console/media/" + id); got.status != http.StatusSeeOther || got.location != "/console/signin?next=%2Fconsole%2Fmedia%2F"+id {
			t.Errorf("signed out, file %s: got %d to %q, want the redirect to sign in", id, got.status, got.location)
		}
	}
}
