package web_test

import (
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/gateway"
	"github.com/simrelay/simrelay/web"
)

// presenceHeld is the hub whose Presence, once armed, reads the links,
// then says so (read) and waits (go on) before it answers what it read:
// a link that comes up meanwhile is missing from the answer.
type presenceHeld struct {
	*gateway.Hub
	mu    sync.Mutex
	armed bool
	read  chan struct{} // room for one: the read never waits on the test
	goOn  chan struct{}
	once  sync.Once
}

// release lets the held read answer (once; a test that failed before it
// leaves no handler waiting).
func (p *presenceHeld) release() { p.once.Do(func() { close(p.goOn) }) }

func (p *presenceHeld) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

func (p *presenceHeld) Presence(devices map[string]uint64) map[string]time.Time {
	out := p.Hub.Presence(devices)
	p.mu.Lock()
	held := p.armed
	p.armed = false
	p.mu.Unlock()
	if held {
		p.read <- struct{}{}
		<-p.goOn
	}
	return out
}

// TestBrowserBadgeHeardDuringAReloadStays: a phone that links while the
// messages page's reload is on its way (its answer read the links before
// the phone's) shows online once the reload is drawn, as its event said:
// the reload's answer, older than the event, drew the badge offline again,
// and it stayed so until the phone's link next came or went.
func TestBrowserBadgeHeardDuringAReloadStays(t *testing.T) {
	t.Parallel()
	held := &presenceHeld{read: make(chan struct{}, 1), goOn: make(chan struct{})}
	h, opt := holdStream(t)
	e := newEnv(t, opt, func(o *envOptions) {
		o.phones = func(hub *gateway.Hub) web.Phones { held.Hub = hub; return held }
	})
	t.Cleanup(held.release) // before the server's close, which waits for its handlers
	key := e.company("Acme", "ada@acme.test", "Correct1horse")
	ph := e.pairPhone(e.pairingCode(key), "fp-1", false)
	two := e.registerPhone(e.pairingCode(key), "fp-2")
	<-ph.Receive(proto.Inbound{ClientID: "in-a", Channel: proto.ChannelSMS, From: "+15550100000", Message: "the open thread", SIMSlot: "SIM1"})
	ctx := chrome(t)
	signInUI(t, ctx, e.url, "ada@acme.test", "Correct1horse")

	h.start()
	do(t, ctx, "open a thread", chromedp.Navigate(e.url+"/console/messages?device=fp-1&phone=%2B15550100000"), chromedp.WaitVisible(chromedp.CSS(`#send`)))
	waitFor(t, ctx, "fp-2 offline as drawn", optionOnline("fp-2", false))
	eval[bool](t, ctx, `window.drawnConvs = document.querySelector("#convs li"), true`)
	h.reachedStream(t)
	// A change the page missed: its stream, once open, says catchup and
	// the page reloads, whose answer reads the links (armed).
	<-ph.Receive(proto.Inbound{ClientID: "in-b", Channel: proto.ChannelSMS, From: "+15550100000", Message: "before the stream", SIMSlot: "SIM1"})
	held.arm()
	h.free()
	select {
	case <-held.read:
	case <-time.After(browserTimeout):
		t.Fatal("the page's reload never read the links")
	}
	// The reload's answer is read, fp-2 offline in it; fp-2 links and the
	// open stream tells the page, before the answer goes.
	e.runPhone(two, phoneHello, false)
	waitFor(t, ctx, "fp-2 online, as its event said", optionOnline("fp-2", true))
	held.release()

	waitFor(t, ctx, "the reload drawn", `!document.contains(window.drawnConvs) && document.querySelector("#thread").textContent.indexOf("before the stream") >= 0`)
	if !eval[bool](t, ctx, optionOnline("fp-2", true)) {
		t.Fatalf("fp-2 is linked and its event came after the reload's answer was read, yet the page shows it offline: %q",
			eval[string](t, ctx, `document.querySelector('#device option[value="fp-2"]').textContent`))
	}
}
