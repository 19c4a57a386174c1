package web_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// badgeIs is the script that says whether every badge sel finds (at least
// one) reads online or offline, as the server draws it: its class and its
// word.
func badgeIs(sel string, online bool) string {
	want := "offline"
	if online {
		want = "online"
	}
	return `(function(){var bs=document.querySelectorAll(` + jsString(sel) + `);if(!bs.length){return false}` +
		`for(var i=0;i<bs.length;i++){if(bs[i].textContent!=="` + want + `"||!bs[i].classList.contains("` + want + `")){return false}}return true})()`
}

// agentReg registers an agent (a phone that announces WhatsApp numbers)
// without linking it; agentHello is its hello.
func agentReg(t *testing.T, e *env, code, fingerprint string) client.Registration {
	t.Helper()
	reg, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: code, DeviceFingerprint: fingerprint, DeviceName: "Agent " + fingerprint, AppVersion: "agent-1",
		SIMs: []proto.SIM{{Slot: "SIM1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func agentHello(numbers ...string) proto.Hello {
	h := proto.Hello{AppVersion: "agent-1", SIMs: []proto.SIM{{Slot: "SIM1"}}}
	for _, n := range numbers {
		h.WhatsApp = append(h.WhatsApp, proto.WhatsAppNumber{Phone: n})
	}
	return h
}

// TestBrowserDevicesPageBadgesAreLive: on the devices page a phone that
// links shows online, and one whose link ends offline, without a reload,
// on the same stream as the messages page. The badges were drawn with the
// page and changed only with a reload.
func TestBrowserDevicesPageBadgesAreLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	_, stopOne := e.runPhoneUntil(e.registerPhone(e.pairingCode(key), "fp-1"), phoneHello, false)
	two := e.registerPhone(e.pairingCode(key), "fp-2")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the devices", chromedp.Navigate(e.url+"/console/devices"), chromedp.WaitVisible(chromedp.CSS(`#device-fp-2`)))
	waitFor(t, ctx, "the stream open", `document.getElementById("devices").dataset.live === "true"`)
	waitFor(t, ctx, "fp-1 online and fp-2 offline as drawn", badgeIs("#device-fp-1 [data-online]", true)+" && "+badgeIs("#device-fp-2 [data-online]", false))
	eval[bool](t, ctx, `window.sameLoad = true`)

	e.runPhone(two, phoneHello, false)
	waitFor(t, ctx, "fp-2 online", badgeIs("#device-fp-2 [data-online]", true))
	stopOne()
	waitFor(t, ctx, "fp-1 offline", badgeIs("#device-fp-1 [data-online]", false))
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded")
	}
}

// TestBrowserNumbersListBadgesAreLive: the numbers list shows an agent's
// link going and coming back, on every row of its numbers, without a
// reload.
func TestBrowserNumbersListBadgesAreLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	reg := agentReg(t, e, e.pairingCode(key), "agent-1")
	_, stop := e.runPhoneUntil(reg, agentHello("+15550100001", "+15550100002"), false)
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the numbers", chromedp.Navigate(e.url+"/console/numbers"), chromedp.WaitVisible(chromedp.CSS(`table.numbers`)))
	waitFor(t, ctx, "the stream open", `document.getElementById("numbers").dataset.live === "true"`)
	if n := eval[int](t, ctx, `document.querySelectorAll("table.numbers [data-online]").length`); n != 2 {
		t.Fatalf("%d badges listed, want the two numbers'", n)
	}
	waitFor(t, ctx, "the agent online as drawn", badgeIs("table.numbers [data-online]", true))
	eval[bool](t, ctx, `window.sameLoad = true`)

	stop()
	waitFor(t, ctx, "the agent offline on both rows", badgeIs("table.numbers [data-online]", false))
	e.runPhone(reg, agentHello("+15550100001", "+15550100002"), false)
	waitFor(t, ctx, "the agent online again on both rows", badgeIs("table.numbers [data-online]", true))
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded")
	}
}

// TestBrowserBadgesWithoutTheScript: with scripts off, the devices page
// and the numbers list draw each badge as the links stand when the page
// loads, and open no stream.
func TestBrowserBadgesWithoutTheScript(t *testing.T) {
	t.Parallel()
	h, opt := holdStream(t)
	e := newEnv(t, opt)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	reg := agentReg(t, e, e.pairingCode(key), "agent-1")
	_, stop := e.runPhoneUntil(reg, agentHello("+15550100001"), false)
	two := e.registerPhone(e.pairingCode(key), "fp-2")
	ctx := chrome(t)
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	h.start()
	do(t, ctx, "open the devices", chromedp.Navigate(e.url+"/console/devices"), chromedp.WaitVisible(chromedp.CSS(`#device-fp-2`)))
	// The script is off; the page is read through the protocol, which runs
	// its scripts regardless.
	waitFor(t, ctx, "agent-1 online and fp-2 offline", badgeIs("#device-agent-1 [data-online]", true)+" && "+badgeIs("#device-fp-2 [data-online]", false))
	do(t, ctx, "open the numbers", chromedp.Navigate(e.url+"/console/numbers"), chromedp.WaitVisible(chromedp.CSS(`table.numbers`)))
	waitFor(t, ctx, "the agent online", badgeIs("table.numbers [data-online]", true))

	stop()
	e.runPhone(two, phoneHello, false)
	do(t, ctx, "open the numbers again", chromedp.Navigate(e.url+"/console/numbers"), chromedp.WaitVisible(chromedp.CSS(`table.numbers`)))
	waitFor(t, ctx, "the agent offline", badgeIs("table.numbers [data-online]", false))
	do(t, ctx, "open the devices again", chromedp.Navigate(e.url+"/console/devices"), chromedp.WaitVisible(chromedp.CSS(`#device-fp-2`)))
	waitFor(t, ctx, "agent-1 offline and fp-2 online", badgeIs("#device-agent-1 [data-online]", false)+" && "+badgeIs("#device-fp-2 [data-online]", true))
	if n := h.count("/console/events"); n != 0 {
		t.Errorf("pages without their script asked for the stream %d times", n)
	}
}

// TestBrowserDevicesPageCatchesUpTheBadges: a phone that linked between
// the devices page's drawing and its stream's opening shows online once
// the stream opens, with one reload of the badges. A page with nothing to
// catch up (the devices page, the numbers list) asks nothing more than
// itself, its script and stylesheet and its stream.
func TestBrowserDevicesPageCatchesUpTheBadges(t *testing.T) {
	t.Parallel()
	h, opt := holdStream(t)
	e := newEnv(t, opt)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	one := e.registerPhone(e.pairingCode(key), "fp-1")
	e.runAgent(e.pairingCode(key), "agent-1", []string{"+15550100001"}, nil, false)
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")

	h.start()
	do(t, ctx, "open the devices", chromedp.Navigate(e.url+"/console/devices"), chromedp.WaitVisible(chromedp.CSS(`#device-fp-1`)))
	eval[bool](t, ctx, `window.sameLoad = true`)
	h.reachedStream(t)
	e.runPhone(one, phoneHello, false)
	h.free()
	waitFor(t, ctx, "the stream open", `document.getElementById("devices").dataset.live === "true"`)
	waitFor(t, ctx, "fp-1 online", badgeIs("#device-fp-1 [data-online]", true))
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded")
	}
	if n := h.count("/console/devices/state"); n != 1 {
		t.Errorf("the badges were reloaded %d times, want once", n)
	}
	h.mu.Lock()
	t.Logf("requests of the devices page that caught up: %v", h.hits)
	h.mu.Unlock()

	// Nothing changed: the page, its script and stylesheet, the stream
	// (held no more).
	e.runPhone(e.registerPhone(e.pairingCode(key), "fp-3"), phoneHello, false)
	for _, pg := range []struct{ path, list string }{{"/console/devices", "devices"}, {"/console/numbers", "numbers"}} {
		h.start()
		do(t, ctx, "open "+pg.path, chromedp.Navigate(e.url+pg.path), chromedp.WaitVisible(chromedp.CSS(`#`+pg.list)))
		waitFor(t, ctx, "the stream open", `document.getElementById("`+pg.list+`").dataset.live === "true"`)
		h.mu.Lock()
		hits := fmt.Sprint(h.hits)
		h.mu.Unlock()
		t.Logf("requests of %s with nothing to catch up: %s", pg.path, hits)
		if h.count("/console/devices/state") != 0 || h.count("/console/events") < 1 || h.count(pg.path) != 1 {
			t.Errorf("%s asked %s; want the page and its stream once, no reload", pg.path, hits)
		}
	}
}

// TestBrowserLiveViewCatchUpRedrawsTheMoreLine: a catch-up that brings
// the conversation list to more than it lists draws the line saying older
// ones are not listed, as a page drawn then would; it was left as the page
// was drawn. A conversation the stream adds then counts in it.
func TestBrowserLiveViewCatchUpRedrawsTheMoreLine(t *testing.T) {
	t.Parallel()
	h, opt := holdStream(t)
	e := newEnv(t, opt)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.pairPhone(e.pairingCode(key), "fp-1", false)
	send := func(from, n int) { e.sendToMany(t, key, "fp-1", from, n) }
	send(0, 199)
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")

	h.start()
	do(t, ctx, "open the messages", chromedp.Navigate(e.url+"/console/messages?device=fp-1"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
	if eval[bool](t, ctx, `!!document.getElementById("more-convs")`) {
		t.Fatal("199 conversations drawn with the line about older ones")
	}
	h.reachedStream(t)
	send(199, 2)
	h.free()
	waitFor(t, ctx, "the stream open", `document.getElementById("chat").dataset.live === "true"`)
	waitFor(t, ctx, "the latest 200 listed", `document.querySelectorAll("#convs li").length === 200`)
	waitFor(t, ctx, "the line about older ones", `(function(){var p=document.getElementById("more-convs");return !!p&&p.textContent.indexOf("The 200 latest are listed")===0})()`)
	if n := h.count("/console/messages/thread"); n != 1 {
		t.Errorf("the list was reloaded %d times, want once", n)
	}
	// A conversation the stream adds to the list is one more listed.
	send(201, 1)
	waitFor(t, ctx, "the line counting the new one", `(function(){var p=document.getElementById("more-convs");return !!p&&p.textContent.indexOf("The 201 latest are listed")===0&&document.querySelectorAll("#convs li").length===201})()`)
}

// TestBrowserNumbersListCatchesUpTheBadges: an agent whose link ended
// between the numbers list's drawing and its stream's opening shows
// offline once the stream opens, with one reload of the badges.
func TestBrowserNumbersListCatchesUpTheBadges(t *testing.T) {
	t.Parallel()
	h, opt := holdStream(t)
	e := newEnv(t, opt)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	reg := agentReg(t, e, e.pairingCode(key), "agent-1")
	_, stop := e.runPhoneUntil(reg, agentHello("+15550100001"), false)
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")

	h.start()
	do(t, ctx, "open the numbers", chromedp.Navigate(e.url+"/console/numbers"), chromedp.WaitVisible(chromedp.CSS(`table.numbers`)))
	eval[bool](t, ctx, `window.sameLoad = true`)
	h.reachedStream(t)
	told := e.told.of("agent-1")
	stop()
	// The link's end told to the tabs before the stream opens: told after,
	// it is an event the stream brings, with nothing to catch up.
	poll.Until(t, "the link's end told", func() bool { return e.told.of("agent-1") > told })
	h.free()
	waitFor(t, ctx, "the stream open", `document.getElementById("numbers").dataset.live === "true"`)
	waitFor(t, ctx, "the agent offline", badgeIs("table.numbers [data-online]", false))
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded")
	}
	if n := h.count("/console/devices/state"); n != 1 {
		t.Errorf("the badges were reloaded %d times, want once", n)
	}
	h.mu.Lock()
	t.Logf("requests of the numbers list that caught up: %v", h.hits)
	h.mu.Unlock()
}
