package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/webhook"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// pngBytes is a real PNG header and some bytes: it sniffs as image/png.
var pngBytes = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{7}, 3000)...)

// upload is POST /device/media with a device token.
func (e *env) upload(deviceToken, key, filename, contentType string, body []byte) resp {
	e.t.Helper()
	q := url.Values{"key": {key}}
	if filename != "" {
		q.Set("filename", filename)
	}
	return e.do(call{method: "POST", path: "/device/media?" + q.Encode(), token: deviceToken, body: string(body), header: map[string]string{"Content-Type": contentType}})
}

// get is a plain GET of a full URL without a credential.
func get(t *testing.T, u string) (*http.Response, []byte) {
	t.Helper()
	res, err := testhttp.Client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

// TestInboundMediaToAPIAndWebhook: an agent uploads an image and a
// document, its inbound frame names them; the message lists them, GET
// /media/{id} serves them to the company (404 to another), the webhook
// carries signed links that work without a credential until they expire,
// and nothing is served in a way a browser would run.
func TestInboundMediaToAPIAndWebhook(t *testing.T) {
	t.Parallel()
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newWebhookEnv(t, whConfig(rc), roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	reg := e.pairPhone(a.apiKey, "agent-a")
	ag := e.runAgent(reg, "agent-a", []string{waNumber}, nil, false)
	wa := e.numberID(a.apiKey, "whatsapp", waNumber)
	e.whPut(a.apiKey, map[string]any{"url": rc.URL + "/all"})

	before, err := e.store.StorageUsed(uint64(a.id), e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	img := e.upload(reg.DeviceToken, "wa-1/0", "", "image/png", pngBytes)
	e.want(img, http.StatusCreated, "")
	if again := e.upload(reg.DeviceToken, "wa-1/0", "", "image/png", pngBytes); again.Status != http.StatusOK || again.str("id") != img.str("id") {
		t.Fatalf("a repeated key: got %d %s, want 200 with id %s", again.Status, again.Raw, img.str("id"))
	}
	pdf := []byte("%PDF-1.4\n" + strings.Repeat("x", 500))
	doc := e.upload(reg.DeviceToken, "wa-1/1", "invoice 7.pdf", "application/pdf", pdf)
	e.want(doc, http.StatusCreated, "")
	// A page labelled as an image is stored as a download, never inline.
	fake := e.upload(reg.DeviceToken, "wa-2/0", "x.png", "image/png", []byte("<html><script>alert(1)</script></html>"))
	e.want(fake, http.StatusCreated, "")
	if fake.str("content_type") != "application/octet-stream" || img.str("content_type") != "image/png" || doc.str("content_type") != "application/pdf" {
		t.Fatalf("content types: got %s, %s, %s", fake.Raw, img.Raw, doc.Raw)
	}
	after, _ := e.store.StorageUsed(uint64(a.id), e.clock.Now())
	if after-before < int64(len(pngBytes)+len(pdf)) {
		t.Fatalf("storage budget counted %d bytes for the uploads, want at least %d", after-before, len(pngBytes)+len(pdf))
	}

	// Bad uploads: no device token, over the cap, no key.
	e.want(e.upload(a.apiKey, "wa-9/0", "", "image/png", pngBytes), http.StatusUnauthorized, "unauthorized")
	e.want(e.upload(reg.DeviceToken, "wa-9/0", "", "image/png", bytes.Repeat([]byte{1}, testMediaMax+1)), http.StatusRequestEntityTooLarge, "payload_too_large")
	e.want(e.upload(reg.DeviceToken, "", "", "image/png", pngBytes), http.StatusBadRequest, "validation_failed")
	// A name that would show as another (a right-to-left override turns
	// "invoice\u202Efdp.exe" into "invoiceexe.pdf") or hide in a listing
	// (control characters) is refused, naming the field.
	for _, name := range []string{"invoice\u202Efdp.exe", "a\u2066b.pdf", "tab\tname.pdf", "bell\x07.pdf", "del\x7f.pdf", "c1\u0085.pdf"} {
		r := e.upload(reg.DeviceToken, "wa-9/1", name, "application/pdf", pngBytes)
		e.want(r, http.StatusBadRequest, "validation_failed")
		if r.str("field") != "filename" {
			t.Errorf("filename %q: got field %q, want filename", name, r.str("field"))
		}
	}

	// Not yet any message's: nobody reads it.
	e.want(e.do(call{method: "GET", path: "/media/" + img.str("id"), token: a.apiKey}), http.StatusNotFound, "not_found")

	ack := waitAck(t, ag.Receive(proto.Inbound{ClientID: "wa-1", Channel: "whatsapp", From: "+15557654321", To: waNumber,
		Message: "the label", Media: []string{img.str("id"), doc.str("id")}}))
	if ack.ID == 0 {
		t.Fatal("no id in the ack")
	}

	// The message lists its files.
	h := e.do(call{method: "GET", path: "/whatsapp/messages?number_id=" + wa, token: a.apiKey})
	var hist struct {
		Messages []struct {
			Media []struct {
				ID, ContentType, Filename string
				Size                      int64
			} `json:"media"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(h.Raw, &hist); err != nil || len(hist.Messages) != 1 || len(hist.Messages[0].Media) != 2 ||
		hist.Messages[0].Media[0].ID != img.str("id") || hist.Messages[0].Media[1].Size != int64(len(pdf)) {
		t.Fatalf("history: got %s", h.Raw)
	}

	// The company's export lists them (not their bytes).
	if x := e.do(call{method: "GET", path: "/company/export", token: a.apiKey}); x.Status != http.StatusOK ||
		!strings.Contains(string(x.Raw), `"media":[{"id":"`+img.str("id")+`","content_type":"image/png","size":`) || bytes.Contains(x.Raw, pngBytes[16:64]) {
		t.Fatalf("export: got %d, want the message's media listed", x.Status)
	}

	// The company reads them with its credential; another company and no
	// credential do not.
	r := e.do(call{method: "GET", path: "/media/" + img.str("id"), token: a.access})
	if r.Status != http.StatusOK || !bytes.Equal(r.Raw, pngBytes) || r.Header.Get("Content-Type") != "image/png" ||
		!strings.HasPrefix(r.Header.Get("Content-Disposition"), "inline") || r.Header.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.Contains(r.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("GET image: got %d %v", r.Status, r.Header)
	}
	r = e.do(call{method: "GET", path: "/media/" + doc.str("id"), token: a.apiKey})
	if r.Status != http.StatusOK || !bytes.Equal(r.Raw, pdf) || r.Header.Get("Content-Type") != "application/pdf" ||
		r.Header.Get("Content-Disposition") != `attachment; filename="invoice 7.pdf"` {
		t.Fatalf("GET document: got %d %v", r.Status, r.Header)
	}
	// A part of it, by byte range; a range past its end is refused with
	// the contract's error body, naming the Range header.
	r = e.do(call{method: "GET", path: "/media/" + doc.str("id"), token: a.apiKey, header: map[string]string{"Range": "bytes=1-4"}})
	if r.Status != http.StatusPartialContent || !bytes.Equal(r.Raw, pdf[1:5]) ||
		r.Header.Get("Content-Range") != fmt.Sprintf("bytes 1-4/%d", len(pdf)) || r.Header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("GET a range of the document: got %d %q %v", r.Status, r.Raw, r.Header)
	}
	r = e.do(call{method: "GET", path: "/media/" + doc.str("id"), token: a.apiKey, header: map[string]string{"Range": fmt.Sprintf("bytes=%d-", len(pdf))}})
	e.want(r, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable")
	if r.str("field") != "Range" || r.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", len(pdf)) {
		t.Fatalf("a range past the end: field %q, Content-Range %q", r.str("field"), r.Header.Get("Content-Range"))
	}
	e.want(e.do(call{method: "GET", path: "/media/" + img.str("id"), token: b.apiKey, header: map[string]string{"Range": "bytes=0-9"}}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "GET", path: "/media/" + img.str("id"), token: b.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "GET", path: "/media/med_nope", token: a.apiKey}), http.StatusNotFound, "not_found")
	e.want(e.do(call{method: "GET", path: "/media/" + img.str("id")}), http.StatusUnauthorized, "unauthorized")

	// Another company's agent cannot claim A's upload for its message.
	regB := e.pairPhone(b.apiKey, "agent-b")
	agB := e.runAgent(regB, "agent-b", []string{"+15550003333"}, nil, false)
	agB.Receive(proto.Inbound{ClientID: "b-1", Channel: "whatsapp", From: "+15557654321", To: "+15550003333", Message: "steal", Media: []string{fake.str("id")}})
	waitAck(t, agB.Receive(proto.Inbound{ClientID: "b-2", Channel: "whatsapp", From: "+15557654321", To: "+15550003333", Message: "after"}))
	bid := e.numberID(b.apiKey, "whatsapp", "+15550003333")
	if h := e.do(call{method: "GET", path: "/whatsapp/messages?number_id=" + bid, token: b.apiKey}); h.Body["total"] != 1.0 {
		t.Fatalf("B's messages: got %s, want only the one without media", h.Raw)
	}

	// The webhook carries the files with signed links.
	e.eventually("the webhook delivery arrives", func() bool { return len(rc.Requests()) == 1 })
	var body struct {
		Data struct {
			Media []struct {
				ID, URL, ContentType string
				URLExpiresAt         string `json:"url_expires_at"`
				Size                 int64
			} `json:"media"`
		} `json:"data"`
	}
	if err := json.Unmarshal(rc.Requests()[0].Body, &body); err != nil || len(body.Data.Media) != 2 {
		t.Fatalf("webhook body: %s", rc.Requests()[0].Body)
	}
	link := body.Data.Media[1].URL
	if body.Data.Media[0].ID != img.str("id") || body.Data.Media[1].Size != int64(len(pdf)) || !strings.HasPrefix(link, e.url+"/media/"+doc.str("id")+"?") ||
		body.Data.Media[1].URLExpiresAt != e.clock.Now().Add(72*time.Hour).UTC().Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("webhook media: got %+v", body.Data.Media)
	}
	res, got := get(t, link)
	if res.StatusCode != http.StatusOK || !bytes.Equal(got, pdf) || !strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("signed link: got %d %v", res.StatusCode, res.Header)
	}
	// Altered, pointed at another file, or expired: refused.
	for name, u := range map[string]string{
		"altered signature": strings.Replace(link, "signature=", "signature=0", 1),
		"other file":        strings.Replace(link, doc.str("id"), img.str("id"), 1),
	} {
		if res, b := get(t, u); res.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: got %d %s, want 403", name, res.StatusCode, b)
		}
	}
	e.clock.Advance(72*time.Hour + time.Second)
	if res, b := get(t, link); res.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `"error":"forbidden"`) {
		t.Fatalf("expired link: got %d %s, want 403", res.StatusCode, b)
	}
}

// TestMediaUploadsPerCompanyAreBounded: a company with its uploads under
// way (slow agents, one upload each) gets 429 with Retry-After for one
// more, of another of its devices, and for a second upload of a device
// whose first is under way, while another company still uploads; once the
// slow ones finish, they are stored.
func TestMediaUploadsPerCompanyAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	b := e.newCompany("Other", "owner@other.test")
	regB := e.pairPhone(b.apiKey, "agent-b")

	var slow []*slowUpload
	var regA []client.Registration
	for i := range media.DefaultUploadsPerCompany + 1 {
		regA = append(regA, e.pairPhone(a.apiKey, "agent-a"+strconv.Itoa(i)))
	}
	for i := range media.DefaultUploadsPerCompany {
		slow = append(slow, startSlowUpload(t, e, regA[i].DeviceToken, "slow/"+strconv.Itoa(i)))
	}
	// An upload holds its places from before its spool file is made until
	// it ends: once every slow one has its file, no other upload of the
	// company can start. (An upload tried earlier could take a place before
	// a slow one's request reached it, and leave the slow one refused.)
	e.eventually("every slow upload under way", func() bool {
		spooled, _ := os.ReadDir(e.uploads)
		return len(spooled) == media.DefaultUploadsPerCompany
	})
	for _, c := range []struct {
		name, token, want string
	}{
		{"an upload beyond the company's places", regA[media.DefaultUploadsPerCompany].DeviceToken,
			"The company has 4 uploads under way, the most at once; retry in 5 seconds."},
		{"a second upload of a device", regA[0].DeviceToken,
			"The device has 1 upload under way, the most at once; retry in 5 seconds."},
	} {
		r := e.upload(c.token, "quick/0", "", "image/png", pngBytes)
		if r.Status != http.StatusTooManyRequests || r.str("error") != "rate_limited" || r.Header.Get("Retry-After") != "5" {
			t.Fatalf("%s: %d %v %s, want 429 rate_limited with Retry-After 5", c.name, r.Status, r.Header, r.Raw)
		}
		if r.str("message") != c.want {
			t.Errorf("%s: message %q, want %q", c.name, r.str("message"), c.want)
		}
	}
	e.want(e.upload(regB.DeviceToken, "other/0", "", "image/png", pngBytes), http.StatusCreated, "")
	for _, u := range slow {
		u.finish(t)
	}
	e.want(e.upload(regA[0].DeviceToken, "after/0", "", "image/png", pngBytes), http.StatusCreated, "")
}

// slowUpload is a PNG upload whose first 100 bytes were sent and whose
// rest waits for finish.
type slowUpload struct {
	key  string
	body *io.PipeWriter
	done chan error // the request's outcome: nil when it was answered 201
}

// startSlowUpload starts a slow upload of the device's under key; however
// the test ends, the upload ends (the server's Close waits for it).
func startSlowUpload(t *testing.T, e *env, token, key string) *slowUpload {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", e.url+"/device/media?key="+key, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "image/png")
	u := &slowUpload{key: key, body: pw, done: make(chan error, 1)}
	go func() {
		res, err := testhttp.Client.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode != http.StatusCreated {
				err = fmt.Errorf("answered %d, want 201", res.StatusCode)
			}
		}
		u.done <- err
	}()
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	if _, err := pw.Write(pngBytes[:100]); err != nil {
		t.Fatal(err)
	}
	return u
}

// finish sends the rest of the upload and wants it stored.
func (u *slowUpload) finish(t *testing.T) {
	t.Helper()
	if _, err := u.body.Write(pngBytes[100:]); err != nil {
		t.Fatal(err)
	}
	u.body.Close()
	if err := <-u.done; err != nil {
		t.Fatalf("slow upload %s: %v", u.key, err)
	}
}

// TestSlowUploadsHoldNoCommit: agents of as many companies as the server
// commits uploads at once (media.DefaultUploads), each sending a file
// slowly, leave the other companies' uploads stored at once; the slow ones
// are stored when they end. Their arrival held the commit places, and every
// other company's upload waited for one (two tenants could stall all media
// for good, an upload a minute each).
func TestSlowUploadsHoldNoCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	var slow []*slowUpload
	for i := range media.DefaultUploads {
		c := e.newCompany(fmt.Sprintf("Slow %d", i), fmt.Sprintf("owner@slow%d.test", i))
		reg := e.pairPhone(c.apiKey, fmt.Sprintf("slow-agent-%d", i))
		slow = append(slow, startSlowUpload(t, e, reg.DeviceToken, "slow/0"))
	}
	e.eventually("every slow upload under way", func() bool {
		spooled, _ := os.ReadDir(e.uploads)
		return len(spooled) == media.DefaultUploads
	})
	b := e.newCompany("Quick", "owner@quick.test")
	regB := e.pairPhone(b.apiKey, "quick-agent")
	quick := make(chan resp, 1)
	go func() { quick <- e.upload(regB.DeviceToken, "quick/0", "", "image/png", pngBytes) }()
	var r resp
	e.eventually("another company's upload is answered while the slow ones arrive", func() bool {
		select {
		case r = <-quick:
			return true
		default:
			return false
		}
	})
	e.want(r, http.StatusCreated, "")
	for _, u := range slow {
		u.finish(t)
	}
}

// TestMediaUploadOfDisabledDevice: a disabled device (a lost phone, an
// agent switched off by an admin) stores nothing, as its link is refused;
// once enabled again it uploads.
func TestMediaUploadOfDisabledDevice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "agent-a")
	e.want(e.do(call{method: "PATCH", path: "/device/agent-a", token: a.apiKey, body: map[string]any{"status": "disabled"}}), http.StatusOK, "")
	e.want(e.upload(reg.DeviceToken, "wa-1/0", "", "image/png", pngBytes), http.StatusForbidden, "device_disabled")
	e.want(e.do(call{method: "PATCH", path: "/device/agent-a", token: a.apiKey, body: map[string]any{"status": "active"}}), http.StatusOK, "")
	e.want(e.upload(reg.DeviceToken, "wa-1/0", "", "image/png", pngBytes), http.StatusCreated, "")
}

// A refused upload is answered while its chunked body is still open: the
// server does not read on (net/http would read up to 256 KiB of it first,
// so a slow agent would wait for its own refusal), and closes the
// connection after the answer.
func TestRefusedUploadAnsweredWhileItsBodyIsOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "agent-a")
	e.want(e.do(call{method: "PATCH", path: "/device/agent-a", token: a.apiKey, body: map[string]any{"status": "disabled"}}), http.StatusOK, "")
	for _, c := range []struct {
		name, token string
		status      int
	}{
		{"unknown token", device.TokenPrefix + strings.Repeat("x", 40), http.StatusUnauthorized},
		{"disabled device", reg.DeviceToken, http.StatusForbidden},
	} {
		pr, pw := io.Pipe()
		req, err := http.NewRequest("POST", e.url+"/device/media?key=open/0", pr) // no length: chunked
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Content-Type", "image/png")
		got := make(chan *http.Response, 1)
		go func() {
			res, err := testhttp.Client.Do(req)
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				got <- nil
				return
			}
			got <- res
		}()
		if _, err := pw.Write(pngBytes[:100]); err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-got:
			if res != nil {
				res.Body.Close()
				if res.StatusCode != c.status || !res.Close {
					t.Errorf("%s: %d, connection closed after it: %v; want %d and closed", c.name, res.StatusCode, res.Close, c.status)
				}
			}
		case <-time.After(poll.Timeout):
			t.Errorf("%s: no answer within %s while the body stayed open", c.name, poll.Timeout)
		}
		pw.Close()
	}
}

// TestUploadOverTheBudgetAnsweredBeforeItsBody: an upload whose
// Content-Length would take the company past its daily storage budget is
// refused 429 storage_budget_exceeded as soon as its headers arrive, with
// the answer a commit would give; the agent's link does not carry the whole
// file (up to 16 MiB of a phone's mobile data, an hour on a slow link) for a
// refusal known before its first byte. It was answered once the body had
// arrived whole. An upload that fits is stored as before.
func TestUploadOverTheBudgetAnsweredBeforeItsBody(t *testing.T) {
	t.Parallel()
	const budget = 64 << 10
	e := newStoreEnv(t, storetest.Options{CompanyDailyStorage: budget}, webhook.Config{}, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	reg := e.pairPhone(a.apiKey, "agent-a")
	e.want(e.upload(reg.DeviceToken, "fits/0", "", "image/png", pngBytes), http.StatusCreated, "")

	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequest("POST", e.url+"/device/media?key=over/0", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = budget // with what the day holds already, past the budget
	req.Header.Set("Authorization", "Bearer "+reg.DeviceToken)
	req.Header.Set("Content-Type", "application/pdf")
	type answer struct {
		res *http.Response
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := testhttp.Client.Do(req)
		got <- answer{res, err}
	}()
	if _, err := pw.Write([]byte("%PDF-1.4\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case ans := <-got:
		if ans.err != nil {
			t.Fatalf("upload: %v", ans.err)
		}
		res := ans.res
		defer res.Body.Close()
		var body struct{ Error string }
		_ = json.NewDecoder(res.Body).Decode(&body)
		if res.StatusCode != http.StatusTooManyRequests || body.Error != "storage_budget_exceeded" || res.Header.Get("Retry-After") == "" || !res.Close {
			t.Fatalf("got %d %q (Retry-After %q, connection closed after it: %v), want 429 storage_budget_exceeded with Retry-After, closed",
				res.StatusCode, body.Error, res.Header.Get("Retry-After"), res.Close)
		}
	case <-time.After(poll.Timeout):
		t.Fatalf("no answer within %s while the body stayed open: the refusal waited for the whole file", poll.Timeout)
	}
}
