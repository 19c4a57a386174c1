package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/poll"
)

// TestBrowserLivePagesCatchUpOnlyWhatTheyShow: a change of the company
// told between a live page's drawing and its stream's opening that the
// page does not show (an SMS on the devices page and the numbers list,
// another device's SMS on a device's messages page, another device's
// link on a number's page) asks no reload: the page asks what it did
// without a change, itself, its script and stylesheet, and its stream.
// Any change of the company reloaded what the page shows: the devices
// page asked its badges again after any message of any phone. A later
// change the page shows, which its stream carries after any catchup,
// tells that the stream said nothing to catch up.
func TestBrowserLivePagesCatchUpOnlyWhatTheyShow(t *testing.T) {
	t.Parallel()
	type world struct {
		e                           *env
		key, wa                     string
		stopOne, stopAgent, linkTwo func()
	}
	for _, pg := range []struct {
		name, path, live, reload string
		// change is what the page does not show, told while its stream is
		// held; flush a change it shows, once its stream is open, and
		// flushed the page drawing it.
		change, flush func(w *world)
		flushed       string
	}{
		{"devices page", "/console/devices", "devices", "/console/devices/state",
			func(w *world) { w.e.sendToMany(t, w.key, "fp-1", 0, 1) }, func(w *world) { w.linkTwo() },
			badgeIs("#device-fp-2 [data-online]", true)},
		{"numbers list", "/console/numbers", "numbers", "/console/devices/state",
			func(w *world) { w.e.sendToMany(t, w.key, "fp-1", 0, 1) }, func(w *world) { w.stopAgent() },
			badgeIs("table.numbers [data-online]", false)},
		{"messages page of fp-2", "/console/messages?device=fp-2", "chat", "/console/messages/thread",
			func(w *world) { w.e.sendToMany(t, w.key, "fp-1", 0, 1) }, func(w *world) { w.stopOne() },
			`document.querySelector('#device option[value="fp-1"]').getAttribute("data-online") === "false"`},
		{"number page", "/console/numbers/whatsapp/{wa}", "agent-msgs", "/console/numbers/whatsapp/{wa}/messages",
			func(w *world) {
				w.e.sendToMany(t, w.key, "fp-1", 0, 1)
				told := w.e.told.of("fp-1")
				w.stopOne()
				poll.Until(t, "fp-1's link end told", func() bool { return w.e.told.of("fp-1") > told })
			}, func(w *world) { w.stopAgent() },
			badgeIs("#number-state [data-online]", false)},
	} {
		t.Run(strings.ReplaceAll(pg.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			h, opt := holdStream(t)
			e := newEnv(t, opt)
			w := &world{e: e, key: e.company("Acme", "ada@acme.test", "Correct1horse")}
			_, w.stopOne = e.runPhoneUntil(e.registerPhone(e.pairingCode(w.key), "fp-1"), phoneHello, false)
			two := e.registerPhone(e.pairingCode(w.key), "fp-2")
			w.linkTwo = func() { e.runPhone(two, phoneHello, false) }
			_, w.stopAgent = e.runPhoneUntil(agentReg(t, e, e.pairingCode(w.key), "agent-1"), agentHello("+15550100001"), false)
			w.wa = e.numberID(1, channel.WhatsApp, "+15550100001")
			// The links' starts reach the tabs before the page is drawn:
			// told after, they are a change the page shows, rightly caught
			// up (the number page reloaded for agent-1's start).
			poll.Until(t, "the links' starts told", func() bool { return e.told.of("fp-1") > 0 && e.told.of("agent-1") > 0 })
			path, reload := strings.ReplaceAll(pg.path, "{wa}", w.wa), strings.ReplaceAll(pg.reload, "{wa}", w.wa)
			ctx := chrome(t)
			signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")

			h.start()
			do(t, ctx, "open "+path, chromedp.Navigate(e.url+path), chromedp.WaitVisible(chromedp.CSS(`#`+pg.live)))
			// What the page's script asks from here on: a reload among it.
			eval[bool](t, ctx, `(function(){window.asked=[];var f=window.fetch;window.fetch=function(u){window.asked.push(String(u));return f.apply(this,arguments)};return true})()`)
			h.reachedStream(t)
			pg.change(w)
			h.free()
			waitFor(t, ctx, "the stream open", `document.getElementById("`+pg.live+`").dataset.live === "true"`)
			pg.flush(w)
			waitFor(t, ctx, "the change the page shows", pg.flushed)
			if asked := eval[[]string](t, ctx, `window.asked.filter(function(u){return u.indexOf(`+jsString(reload)+`)===0})`); len(asked) > 0 || h.count(reload) != 0 {
				t.Errorf("the page reloaded for a change it does not show: its script asked %v, the server counted %d of %s", asked, h.count(reload), reload)
			}
			if h.count(path[:strings.IndexByte(path+"?", '?')]) != 1 || h.count("/console/events") != 1 {
				h.mu.Lock()
				t.Errorf("the page asked %v; want itself and its stream once", h.hits)
				h.mu.Unlock()
			}
		})
	}
}
