package web

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

func TestBrokerDropsASlowTabWithoutBlocking(t *testing.T) {
	t.Parallel()
	b := NewBroker(StreamConfig{Buffer: 2}, nil)
	slow, err := b.subscribe(1, 1, "s1")
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := b.subscribe(1, 2, "s2")
	other, _ := b.subscribe(2, 3, "s3")
	for i := range 3 {
		b.MessageChanged(store.Message{ID: uint64(i + 1), CompanyID: 1})
		<-fast.events // the fast tab keeps up
	}
	select {
	case <-slow.gone:
	default:
		t.Fatal("a tab 3 events behind with a buffer of 2 was not dropped")
	}
	// The dropped tab gets no more events, but its slot is its handler's
	// to give back.
	b.MessageChanged(store.Message{ID: 9, CompanyID: 1})
	if got := len(slow.events); got != 2 {
		t.Errorf("events queued for the dropped tab: got %d, want 2", got)
	}
	if got := b.Streams(); got != 3 {
		t.Errorf("streams before the dropped handler returns: got %d, want 3", got)
	}
	b.release(slow)
	b.release(slow) // a second release gives back nothing more
	if got := b.Streams(); got != 2 {
		t.Errorf("streams after the dropped handler returned: got %d, want 2", got)
	}
	if len(other.events) != 0 {
		t.Errorf("company 2's tab got %d events of company 1", len(other.events))
	}
	b.Close()
	if _, err := b.subscribe(1, 1, "s4"); err == nil {
		t.Error("a closed broker took a new stream")
	}
}

// TestBrokerRendersOnlyForOpenTabs: a change of a company with no tab
// open costs no rendering (every send and report passes here); one with a
// tab open reaches it.
func TestBrokerRendersOnlyForOpenTabs(t *testing.T) {
	b := NewBroker(StreamConfig{Buffer: 4}, nil)
	m := store.Message{ID: 1, CompanyID: 1, UUID: "u", Phone: "+15551234567", Text: "hello", Direction: store.Outbound, Status: store.MsgQueued}
	if n := testing.AllocsPerRun(100, func() { b.MessageChanged(m) }); n != 0 {
		t.Errorf("a change nobody watches allocated %.0f times, want 0", n)
	}
	s, err := b.subscribe(1, 1, "s1")
	if err != nil {
		t.Fatal(err)
	}
	b.MessageChanged(m)
	if got := len(s.events); got != 1 {
		t.Fatalf("events for the open tab: got %d, want 1", got)
	}
}

// TestBrokerSaysWhatAStreamMissedSinceItsPage: a stream hands back the mark
// its page took before reading what it shows (Mark), and learns whether its
// company's messages changed since (missed), which no stream of the page's
// carried. Nothing changed: nothing to catch up. A mark the broker cannot
// vouch for (another node's, malformed, older than it remembers) catches up.
func TestBrokerSaysWhatAStreamMissedSinceItsPage(t *testing.T) {
	t.Parallel()
	now := time.Now()
	b := NewBroker(StreamConfig{}, nil)
	b.mono = func() time.Time { return now }
	all := liveTopics("") // every change of the company
	mark := b.Mark()
	if b.missed(1, mark, all) {
		t.Error("a stream missed something with nothing changed")
	}
	b.MessageChanged(store.Message{ID: 1, CompanyID: 1}) // no tab open: told all the same
	if !b.missed(1, mark, all) {
		t.Error("a change after the page's mark, before its stream, was not missed")
	}
	if b.missed(2, mark, all) {
		t.Error("another company's change was missed")
	}
	if b.missed(1, b.Mark(), all) {
		t.Error("a change before the page's mark was missed")
	}
	// A cluster's other node's event, delivered here, counts the same.
	mark = b.Mark()
	if err := b.Deliver(2, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if !b.missed(2, mark, all) || b.missed(1, mark, all) {
		t.Errorf("after a delivered event of company 2: missed 1 %v, 2 %v", b.missed(1, mark, all), b.missed(2, mark, all))
	}
	other := NewBroker(StreamConfig{}, nil).Mark()
	altered := []byte(b.Mark())
	altered[0] ^= 1 // '0'<->'1', 'a'<->'`'...: another block, or not hex
	for _, m := range []string{other, "x", "x.1", b.Mark() + "0", string(altered)} {
		if !b.missed(3, m, all) {
			t.Errorf("the mark %q (not this broker's now) was taken for one without changes", m)
		}
	}
	// The count in a mark is every company's changes on the node: sealed,
	// and two marks of the same count differ, so a page's marks tell it
	// nothing of other companies' traffic (they read epoch.count).
	if m1, m2 := b.Mark(), b.Mark(); m1 == m2 || strings.Contains(m1, ".") {
		t.Errorf("two marks of one count: %q and %q, want sealed and apart", m1, m2)
	}
	if b.missed(1, "", all) {
		t.Error("a stream without a mark was told to catch up")
	}
	// What is forgotten after changesKept catches up whatever it was.
	old := b.Mark()
	b.MessageChanged(store.Message{ID: 2, CompanyID: 4})
	now = now.Add(changesKept)
	b.MessageChanged(store.Message{ID: 3, CompanyID: 5}) // sweeps
	if _, kept := b.changed[topicKey{4, topic{kind: topicAll}}]; kept {
		t.Error("a change older than changesKept is still held")
	}
	if !b.missed(4, old, all) || !b.missed(6, old, all) {
		t.Error("a mark older than what the broker remembers was taken for one without changes")
	}
	if b.missed(4, b.Mark(), all) {
		t.Error("a fresh mark catches up after a sweep")
	}
}

// TestBrokerTellsADevicesLinkToItsCompanyOnly: a device's link coming or
// going reaches its company's tabs as a "device" event, another company's
// none, and counts as a change for a page drawn before it (missed); one
// delivered from another node too.
func TestBrokerTellsADevicesLinkToItsCompanyOnly(t *testing.T) {
	t.Parallel()
	b := NewBroker(StreamConfig{Buffer: 4}, nil)
	mine, _ := b.subscribe(1, 1, "s1")
	other, _ := b.subscribe(2, 2, "s2")
	all := liveTopics("")
	mark := b.Mark()
	b.DeviceChanged(1, "fp-1", true)
	if got := <-mine.events; got.name != "device" || string(got.body) != `{"device":"fp-1","online":true}` {
		t.Errorf("the company's tab got %s %s", got.name, got.body)
	}
	if len(other.events) != 0 {
		t.Errorf("another company's tab got %d events", len(other.events))
	}
	if !b.missed(1, mark, all) || b.missed(2, mark, all) {
		t.Errorf("after a link of company 1: missed 1 %v, 2 %v", b.missed(1, mark, all), b.missed(2, mark, all))
	}
	if err := b.DeliverDevice(2, RenderDevice("fp-9", false)); err != nil {
		t.Fatal(err)
	}
	if got := <-other.events; got.name != "device" || string(got.body) != `{"device":"fp-9","online":false}` {
		t.Errorf("a delivered device event reached the tab as %s %s", got.name, got.body)
	}
	if err := b.DeliverDevice(2, []byte("{}\n\nevent: message")); err == nil || len(other.events) != 0 {
		t.Error("a device event of more than one line of JSON was delivered")
	}
}

// TestBrokerCatchesUpOnlyWhatThePageShows: a stream names the topics of
// its page (of), and is told to catch up only for a change of one of
// them: the devices page for a device's link, never for a message; the
// messages page of a device for its SMS and any device's link, never for
// another device's SMS or a number's message; a number's page for its
// messages and its agent's link. A change delivered from another node
// counts by its body the same. A stream naming none, or anything else,
// catches up for every change of its company, as before.
func TestBrokerCatchesUpOnlyWhatThePageShows(t *testing.T) {
	t.Parallel()
	b := NewBroker(StreamConfig{}, nil)
	pages := map[string]string{
		"devices":    "devices",
		"messages":   "devices sms:fp-1",
		"number":     "device:agent-1 number:wa1",
		"none":       "",
		"malformed":  "devices sms:",
		"unknown":    "devices mail:x",
		"many":       "sms:a sms:b sms:c sms:d sms:e",
		"noconcerns": "   ",
	}
	for _, c := range []struct {
		what   string
		change func()
		missed []string // the pages told to catch up
	}{
		{"an SMS of fp-1", func() { b.MessageChanged(store.Message{ID: 1, CompanyID: 1, Device: "fp-1"}) }, []string{"messages"}},
		{"an SMS of fp-2", func() { b.MessageChanged(store.Message{ID: 2, CompanyID: 1, Device: "fp-2", Channel: "sms"}) }, nil},
		{"a message of wa1", func() {
			b.MessageChanged(store.Message{ID: 3, CompanyID: 1, Device: "agent-1", Channel: "whatsapp", NumberRef: "wa1"})
		}, []string{"number"}},
		{"a message of wa2", func() {
			b.MessageChanged(store.Message{ID: 4, CompanyID: 1, Device: "agent-1", Channel: "whatsapp", NumberRef: "wa2"})
		}, nil},
		{"fp-2's link", func() { b.DeviceChanged(1, "fp-2", true) }, []string{"devices", "messages"}},
		{"agent-1's link", func() { b.DeviceChanged(1, "agent-1", false) }, []string{"devices", "messages", "number"}},
		{"an SMS of fp-1 from another node", func() {
			_, body, _ := b.RenderLive(store.Message{ID: 5, CompanyID: 1, Device: "fp-1"})
			if err := b.Deliver(1, body); err != nil {
				t.Fatal(err)
			}
		}, []string{"messages"}},
		{"a message of wa1 from another node", func() {
			_, body, _ := b.RenderLive(store.Message{ID: 6, CompanyID: 1, Channel: "whatsapp", NumberRef: "wa1"})
			if err := b.Deliver(1, body); err != nil {
				t.Fatal(err)
			}
		}, []string{"number"}},
		{"agent-1's link from another node", func() {
			if err := b.DeliverDevice(1, RenderDevice("agent-1", true)); err != nil {
				t.Fatal(err)
			}
		}, []string{"devices", "messages", "number"}},
		{"another company's SMS of fp-1", func() { b.MessageChanged(store.Message{ID: 7, CompanyID: 2, Device: "fp-1"}) }, nil},
	} {
		mark := b.Mark()
		c.change()
		for page, of := range pages {
			want := slices.Contains(c.missed, page) || (c.what != "another company's SMS of fp-1" && !slices.Contains([]string{"devices", "messages", "number"}, page))
			if got := b.missed(1, mark, liveTopics(of)); got != want {
				t.Errorf("after %s the %s page (of %q) missed it: %v, want %v", c.what, page, of, got, want)
			}
		}
	}
}
