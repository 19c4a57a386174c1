package web_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
)

// heldStream holds, once hold is set, the opening of the page's live
// stream (its EventSource; the script's fetch of the same URL, which asks
// why a stream was refused, passes) until free: what changes meanwhile
// changed after the page was drawn and before its stream listened. It
// counts every request by path, to see what a page load costs.
type heldStream struct {
	mu      sync.Mutex
	hits    map[string]int
	hold    bool
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func holdStream(t *testing.T) (*heldStream, func(o *envOptions)) {
	h := &heldStream{hits: map[string]int{}, reached: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(h.free)
	return h, func(o *envOptions) {
		o.wrap = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.mu.Lock()
				h.hits[r.URL.Path]++
				held := h.hold && r.URL.Path == "/console/events" && strings.Contains(r.Header.Get("Accept"), "text/event-stream")
				h.mu.Unlock()
				if held {
					select {
					case h.reached <- struct{}{}:
					default:
					}
					select {
					case <-h.release:
					case <-r.Context().Done():
						return
					}
				}
				next.ServeHTTP(w, r)
			})
		}
	}
}

func (h *heldStream) free() { h.once.Do(func() { close(h.release) }) }

func (h *heldStream) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold = true
	h.hits = map[string]int{}
}

// count is how many requests asked for path since start.
func (h *heldStream) count(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[path]
}

// reachedStream waits until the page's stream asked and is held.
func (h *heldStream) reachedStream(t *testing.T) {
	t.Helper()
	select {
	case <-h.reached:
	case <-time.After(browserTimeout):
		t.Fatal("the page never opened its live stream")
	}
}

// TestBrowserLiveViewCatchesUpWhatChangedBeforeItOpened: an inbound SMS
// stored after the messages page was drawn and before its live stream
// opened shows without a reload; it showed only after one (a later
// reconnection's reload of the thread caught it, the first opening never
// did). The page reloads its thread once, then streams on.
func TestBrowserLiveViewCatchesUpWhatChangedBeforeItOpened(t *testing.T) {
	t.Parallel()
	h, opt := holdStream(t)
	e := newEnv(t, opt)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	ph := e.pairPhone(e.pairingCode(key), "fp-1", false)
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")

	h.start()
	do(t, ctx, "open a thread", chromedp.Navigate(e.url+"/console/messages?device=fp-1&phone=%2B15550100000"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
	eval[bool](t, ctx, `window.sameLoad = true`)
	h.reachedStream(t)
	<-ph.Receive(proto.Inbound{ClientID: "in-gap", Channel: proto.ChannelSMS, From: "+15550100000", Message: "arrived before the stream opened", SIMSlot: "SIM1"})
	h.free()

	waitFor(t, ctx, "the stream open", `document.getElementById("chat").dataset.live === "true"`)
	waitText(t, ctx, "#thread .msg.inbound", "arrived before the stream opened")
	// The stream goes on: a later message comes live, and the thread was
	// reloaded once, the page never.
	<-ph.Receive(proto.Inbound{ClientID: "in-live", Channel: proto.ChannelSMS, From: "+15550100000", Message: "arrived live", SIMSlot: "SIM1"})
	waitText(t, ctx, "#thread", "arrived live")
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded")
	}
	if n := h.count("/console/messages/thread"); n != 1 {
		t.Errorf("the thread was reloaded %d times, want once", n)
	}
	if n := h.count("/console/messages"); n != 1 {
		t.Errorf("the page was loaded %d times, want once", n)
	}
	h.mu.Lock()
	t.Logf("requests of one page load that caught up: %v", h.hits)
	h.mu.Unlock()
}

// TestBrowserNumberLiveViewCatchesUpWhatChangedBeforeItOpened: the same
// on a WhatsApp number's page, whose list of messages it reloads.
func TestBrowserNumberLiveViewCatchesUpWhatChangedBeforeItOpened(t *testing.T) {
	t.Parallel()
	h, opt := holdStream(t)
	e := newEnv(t, opt)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	ag := e.runAgent(e.pairingCode(key), "agent-1", []string{"+15550100001"}, nil, false)
	wa := e.numberID(1, channel.WhatsApp, "+15550100001")
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")

	h.start()
	do(t, ctx, "open the number", chromedp.Navigate(e.url+"/console/numbers/whatsapp/"+wa), chromedp.WaitVisible(chromedp.CSS(`#agent-send`)))
	eval[bool](t, ctx, `window.sameLoad = true`)
	h.reachedStream(t)
	<-ag.Receive(proto.Inbound{ClientID: "wa-gap", Channel: proto.ChannelWhatsApp, From: "+15550100999", To: "+15550100001", Message: "arrived before the stream opened"})
	h.free()

	waitFor(t, ctx, "the stream open", `document.getElementById("agent-msgs").dataset.live === "true"`)
	waitText(t, ctx, "#agent-msgs", "arrived before the stream opened")
	if !eval[bool](t, ctx, `window.sameLoad === true`) {
		t.Error("the page reloaded")
	}
}

// TestBrowserLiveViewWithNothingToCatchUpAsksNothingMore: a page whose
// stream opens with nothing changed since it was drawn costs the page, its
// static files and the stream, and no reload of its thread.
func TestBrowserLiveViewWithNothingToCatchUpAsksNothingMore(t *testing.T) {
	t.Parallel()
	h, opt := holdStream(t)
	e := newEnv(t, opt)
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	ph := e.pairPhone(e.pairingCode(key), "fp-1", false)
	<-ph.Receive(proto.Inbound{ClientID: "in-before", Channel: proto.ChannelSMS, From: "+15550100000", Message: "arrived before the page", SIMSlot: "SIM1"})
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")

	h.start()
	do(t, ctx, "open a thread", chromedp.Navigate(e.url+"/console/messages?device=fp-1&phone=%2B15550100000"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
	h.reachedStream(t)
	h.free()
	waitFor(t, ctx, "the stream open", `document.getElementById("chat").dataset.live === "true"`)
	<-ph.Receive(proto.Inbound{ClientID: "in-live", Channel: proto.ChannelSMS, From: "+15550100000", Message: "arrived live", SIMSlot: "SIM1"})
	waitText(t, ctx, "#thread", "arrived live")
	if n := h.count("/console/messages/thread"); n != 0 {
		t.Errorf("the thread was reloaded %d times with nothing to catch up", n)
	}
	h.mu.Lock()
	t.Logf("requests of one page load: %v", h.hits)
	h.mu.Unlock()
}
