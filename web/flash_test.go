package web_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// A banner shows only what this server put in the address: a link from
// elsewhere with ?ok= or ?err= shows nothing, a refused plain form post
// comes back with its message.
func TestBannerShowsOnlyTheServersOwnMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	lure := "Your account is locked. Call +1 555 0100 to unlock it."
	for _, path := range []string{
		"/console/devices?err=" + url.QueryEscape(lure),
		"/console/devices?ok=" + url.QueryEscape(lure),
		"/console/devices?ok=" + url.QueryEscape(lure) + "&sig=AAAAAAAAAAAAAAAAAAAAAA",
		"/console/nowhere?err=" + url.QueryEscape(lure) + "&field=x",
		"/console/signin?err=" + url.QueryEscape(lure),
	} {
		if p := b.get(path); strings.Contains(p.body, "Your account is locked") {
			t.Errorf("GET %s shows the link's sentence", path)
		}
	}

	// A plain form post (no JavaScript) that fails comes back with the
	// server's message beside its field.
	form := url.Values{"csrf": {b.csrf}, "phone": {"not a number"}}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/console/opt-outs", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p := read(t, res)
	if p.status != http.StatusSeeOther || !strings.Contains(p.location, "sig=") {
		t.Fatalf("refused plain post: %d to %q", p.status, p.location)
	}
	back := b.get(p.location)
	if !strings.Contains(back.body, `id="err-phone">`) || strings.Contains(back.body, `id="err-phone"></span>`) {
		t.Errorf("the signed error is not shown beside its field: %.2000s", back.body)
	}
	// The same sentence with another field is not the server's.
	u, _ := url.Parse(p.location)
	q := u.Query()
	q.Set("err", lure)
	u.RawQuery = q.Encode()
	if got := b.get(u.String()); strings.Contains(got.body, "Your account is locked") {
		t.Error("an altered signed error is shown")
	}
}

var bannerText = regexp.MustCompile(`<div id="banner"[^>]*>([^<]*)</div>`)

// banner is what a page's banner says.
func banner(p page) string {
	if m := bannerText.FindStringSubmatch(p.body); m != nil {
		return m[1]
	}
	return ""
}

// A banner link made in one browser carries a name its author chose (a
// renamed device, a phone's own device name); its signature is good for
// that browser only: another company's console, another session of the
// same user and the sign-in page show none of it.
func TestBannerLinkShowsOnlyInTheBrowserItWasMadeFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keyA := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.company("Bolt", "bo@bolt.test", "Correct1horse")
	const lure = "Your account is locked, call 555 0100 now"
	// The phone names itself: the pairing panel's "<name> is paired.".
	if _, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{PairingCode: e.pairingCode(keyA),
		DeviceFingerprint: "fp-acme", DeviceName: lure + " A", AppVersion: "1.2.3"}); err != nil {
		t.Fatal(err)
	}
	ada, ada2, bo, stranger := e.browser(), e.browser(), e.browser(), e.browser()
	ada.signIn("ada@acme.test", "Correct1horse")
	ada2.signIn("ada@acme.test", "Correct1horse")
	bo.signIn("bo@bolt.test", "Correct1horse")

	var links []string
	var state struct {
		Devices []struct {
			Paired    string `json:"paired"`
			PairedSig string `json:"paired_sig"`
		} `json:"devices"`
	}
	if p := ada.get("/console/devices/state"); p.status != http.StatusOK || json.Unmarshal([]byte(p.body), &state) != nil || len(state.Devices) != 1 {
		t.Fatalf("devices state: %d %s", p.status, p.body)
	}
	links = append(links, "?ok="+url.QueryEscape(state.Devices[0].Paired)+"&sig="+url.QueryEscape(state.Devices[0].PairedSig))
	// A rename, as the page's JavaScript posts it (the notice comes back
	// with its signature) ...
	var out struct{ Notice, Sig string }
	if p := ada.post("/console/devices/fp-acme", url.Values{"device_name": {lure + " B"}}); p.status != http.StatusOK || json.Unmarshal([]byte(p.body), &out) != nil {
		t.Fatalf("rename: %d %s", p.status, p.body)
	}
	links = append(links, "?ok="+url.QueryEscape(out.Notice)+"&sig="+url.QueryEscape(out.Sig))
	// ... and as a plain form post (the notice rides in the redirect).
	form := url.Values{"csrf": {ada.csrf}, "device_name": {lure + " C"}}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/console/devices/fp-acme", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := ada.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p := read(t, res)
	u, err := url.Parse(p.location)
	if p.status != http.StatusSeeOther || err != nil || u.Query().Get("sig") == "" {
		t.Fatalf("plain rename: %d to %q", p.status, p.location)
	}
	links = append(links, "?"+u.RawQuery)

	for i, q := range links {
		if got := banner(ada.get("/console/devices" + q)); !strings.Contains(got, lure) {
			t.Errorf("link %d: the browser it was made for does not see its notice: %q %s", i+1, got, q)
		}
		for who, b := range map[string]*browser{"another company's admin": bo, "another session of the same user": ada2} {
			if got := banner(b.get("/console/devices" + q)); got != "" {
				t.Errorf("link %d: %s sees the banner %q", i+1, who, got)
			}
		}
		if got := stranger.get("/console/signin" + q); got.status != http.StatusOK || strings.Contains(got.body, "account is locked") {
			t.Errorf("link %d: the sign-in page: %d, shows the notice: %v", i+1, got.status, strings.Contains(got.body, "account is locked"))
		}
	}

	// The sign-in page still shows the server's own notice to the browser
	// that signed out, and to nobody else.
	p = ada.post("/console/signout", nil)
	if p.status != http.StatusOK || json.Unmarshal([]byte(p.body), &out) != nil || out.Sig == "" {
		t.Fatalf("sign out: %d %s", p.status, p.body)
	}
	q := "/console/signin?ok=" + url.QueryEscape(out.Notice) + "&sig=" + url.QueryEscape(out.Sig)
	if got := banner(ada.get(q)); got != "Signed out." {
		t.Error("the signed-out browser does not see its notice")
	}
	if got := banner(stranger.get(q)); got != "" {
		t.Error("another browser sees the sign-out notice")
	}
}

// A cluster has no sticky sessions: the page a form's redirect leads to
// may be served by another node than the one that signed its banner, as it
// is by the same server after a restart. The banner's key is the server's
// (kept in the store), so another console over the same store shows the
// error a plain post came back with, beside its field, and the notice the
// page's script carries to the next page; one with a key of its own drew
// a blank banner, and the person never learnt why the form was refused.
func TestBannerShowsOnAnotherNodeOfTheCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.company("Acme", "ada@acme.test", "Correct1horse")
	b := e.browser()
	b.signIn("ada@acme.test", "Correct1horse")
	other, err := e.console()
	if err != nil {
		t.Fatal(err)
	}
	node2 := httptest.NewServer(other.Handler())
	t.Cleanup(func() { other.Shutdown(); node2.Close() })
	// The browser's cookies are the host's (127.0.0.1), whatever the port:
	// both nodes get the session, as behind one load balancer.
	get := func(path string) page {
		t.Helper()
		res, err := b.c.Get(node2.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		return read(t, res)
	}

	// A plain form post (no JavaScript) refused on the first node.
	form := url.Values{"csrf": {b.csrf}, "phone": {"not a number"}}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/console/opt-outs", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p := read(t, res)
	if p.status != http.StatusSeeOther || !strings.Contains(p.location, "sig=") {
		t.Fatalf("refused plain post: %d to %q", p.status, p.location)
	}
	u, _ := url.Parse(p.location)
	msg := u.Query().Get("err")
	back := get(p.location)
	if back.status != http.StatusOK || html.UnescapeString(banner(back)) != msg || !strings.Contains(html.UnescapeString(back.body), `id="err-phone">`+msg+`</span>`) {
		t.Errorf("the other node shows the refusal %q nowhere (banner %q): %.1500s", msg, banner(back), back.body)
	}

	// The script's notice, carried to the page it goes to next.
	ok := b.post("/console/opt-outs", url.Values{"phone": {"+14155550100"}})
	var out struct{ Notice, Sig string }
	if err := json.Unmarshal([]byte(ok.body), &out); err != nil || ok.status != http.StatusOK || out.Notice == "" || out.Sig == "" {
		t.Fatalf("add an opt-out: %d %s", ok.status, ok.body)
	}
	next := get("/console/opt-outs?ok=" + url.QueryEscape(out.Notice) + "&sig=" + url.QueryEscape(out.Sig))
	if got := html.UnescapeString(banner(next)); got != out.Notice {
		t.Errorf("the other node's banner: %q, want %q", got, out.Notice)
	}
}
