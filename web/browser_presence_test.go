package web_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// phoneHello is the hello linkPhone's phones give.
var phoneHello = proto.Hello{AppVersion: "1.2.3", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}, {Slot: "SIM2"}}}

// optionOnline is the script that says whether the messages page's device
// list shows the device fp online (its option ends "(online)").
func optionOnline(fp string, online bool) string {
	want := "false"
	if online {
		want = "true"
	}
	return `(function(){var o=document.querySelector('#device option[value="` + fp + `"]');` +
		`return !!o && o.dataset.online === "` + want + `" && /\(online\)$/.test(o.textContent) === ` + want + `})()`
}

// TestBrowserDeviceBadgesAreLive: on the messages page a phone that links
// shows "(online)" in the device list, and one whose link ends loses it,
// without a reload; another company's tab hears nothing of either. The
// badges were drawn with the page and changed only with a reload.
func TestBrowserDeviceBadgesAreLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	e.company("Bolt", "bo@bolt.test", "Correct1horse")
	_, stopOne := e.runPhoneUntil(e.registerPhone(e.pairingCode(key), "fp-1"), phoneHello, false)
	two := e.registerPhone(e.pairingCode(key), "fp-2")
	bo := e.browser()
	bo.signIn("bo@bolt.test", "Correct1horse")
	boEvents, _ := bo.stream(t)
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the messages", chromedp.Navigate(e.url+"/console/messages?device=fp-1"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
	waitFor(t, ctx, "the stream open", `document.getElementById("chat").dataset.live === "true"`)
	waitFor(t, ctx, "fp-1 online and fp-2 offline as drawn", optionOnline("fp-1", true)+" && "+optionOnline("fp-2", false))
	eval[bool](t, ctx, `window.sameLoad = true`)

	e.runPhone(two, phoneHello, false)
	waitFor(t, ctx, "fp-2 online", optionOnline("fp-2", true))
	stopOne()
	waitFor(t, ctx, "fp-1 offline", optionOnline("fp-1", false))
	if got := eval[string](t, ctx, `document.querySelector('#device option[value="fp-1"]').textContent`); got != "Phone fp-1" {
		t.Errorf("fp-1's option reads %q offline", got)
	}
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded")
	}
	select {
	case ev := <-boEvents:
		t.Errorf("another company's tab got %v", ev)
	default:
	}
}

// TestBrowserNumberAgentBadgeIsLive: a number's page shows its agent
// going offline and coming back without a reload.
func TestBrowserNumberAgentBadgeIsLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	reg, err := client.Register(context.Background(), testhttp.Client, e.url, client.RegisterInput{
		PairingCode: e.pairingCode(key), DeviceFingerprint: "agent-1", DeviceName: "Agent agent-1", AppVersion: "agent-1",
		SIMs: []proto.SIM{{Slot: "SIM1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hello := proto.Hello{AppVersion: "agent-1", SIMs: []proto.SIM{{Slot: "SIM1"}}, WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550100001"}}}
	_, stop := e.runPhoneUntil(reg, hello, false)
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")
	do(t, ctx, "open the number", chromedp.Navigate(e.url+"/console/numbers/whatsapp/"+wa), chromedp.WaitVisible(chromedp.CSS(`#agent-send`)))
	waitFor(t, ctx, "the stream open", `document.getElementById("agent-msgs").dataset.live === "true"`)
	waitText(t, ctx, "#number-state [data-online]", "online")
	eval[bool](t, ctx, `window.sameLoad = true`)

	stop()
	waitFor(t, ctx, "the agent offline", `(function(){var b=document.querySelector("#number-state [data-online]");return b.textContent==="offline"&&b.classList.contains("offline")})()`)
	e.runPhone(reg, hello, false)
	waitFor(t, ctx, "the agent online again", `(function(){var b=document.querySelector("#number-state [data-online]");return b.textContent==="online"&&b.classList.contains("online")})()`)
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded")
	}
}

// TestBrowserLiveViewCatchesUpTheConversationsAndBadges: what changed
// between the messages page's drawing and its stream's opening, a message
// of another conversation and a phone that linked, shows once the stream
// opens, in the same one reload as the thread: the catch-up reloaded the
// thread alone, and the conversation and the badge showed after a reload of
// the page.
func TestBrowserLiveViewCatchesUpTheConversationsAndBadges(t *testing.T) {
	t.Parallel()
	h, opt := holdStream(t)
	e := newEnv(t, opt)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	ph := e.pairPhone(e.pairingCode(key), "fp-1", false)
	two := e.registerPhone(e.pairingCode(key), "fp-2")
	<-ph.Receive(proto.Inbound{ClientID: "in-a", Channel: proto.ChannelSMS, From: "+15550100000", Message: "the open thread", SIMSlot: "SIM1"})
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")

	h.start()
	do(t, ctx, "open a thread", chromedp.Navigate(e.url+"/console/messages?device=fp-1&phone=%2B15550100000"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
	eval[bool](t, ctx, `window.sameLoad = true`)
	h.reachedStream(t)
	<-ph.Receive(proto.Inbound{ClientID: "in-b", Channel: proto.ChannelSMS, From: "+15550100777", Message: "another conversation", SIMSlot: "SIM1"})
	e.runPhone(two, phoneHello, false)
	h.free()

	waitFor(t, ctx, "the stream open", `document.getElementById("chat").dataset.live === "true"`)
	waitFor(t, ctx, "the new conversation on top", `(function(){var li=document.querySelector("#convs li");return !!li&&li.dataset.phone==="+15550100777"&&li.textContent.indexOf("another conversation")>=0})()`)
	waitFor(t, ctx, "fp-2 online", optionOnline("fp-2", true))
	if got := eval[string](t, ctx, `document.querySelector('#convs li[data-phone="+15550100000"] a').getAttribute("aria-current")`); got != "true" {
		t.Errorf("the open conversation is marked %q after the reload, want current", got)
	}
	if got := eval[int](t, ctx, `document.querySelectorAll("#thread .msg").length`); got != 1 {
		t.Errorf("the open thread holds %d messages, want its one", got)
	}
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded")
	}
	if n := h.count("/console/messages/thread"); n != 1 {
		t.Errorf("the thread was reloaded %d times, want once", n)
	}
	h.mu.Lock()
	t.Logf("requests of one page load that caught up: %v", h.hits)
	h.mu.Unlock()
}
