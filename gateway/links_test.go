package gateway

import (
	"sync"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// epochLog is a cluster's fencing as the hub sees it: every link claims the
// next epoch, and each Ended is recorded with whether the link was still
// registered on the hub at that moment.
type epochLog struct {
	hub   func() *Hub
	mu    sync.Mutex
	next  uint64
	ended []endedCall
}

type endedCall struct {
	epoch      uint64
	registered bool // the hub still held the link (its close handshake under way)
}

func (l *epochLog) Claim(store.Device) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	return l.next, nil
}

func (l *epochLog) Ended(dev store.Device, epoch uint64) {
	registered := l.hub().lookup(dev.Fingerprint) != nil
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = append(l.ended, endedCall{epoch, registered})
}

func (l *epochLog) calls() []endedCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]endedCall(nil), l.ended...)
}

// muteLinkInCluster is a rig on a cluster's fencing (epochLog) with one
// phone, "mute", linked and online, that reads nothing: a close handshake
// with it waits seconds.
func muteLinkInCluster(t *testing.T) (*rig, *epochLog) {
	t.Helper()
	log := &epochLog{}
	var r *rig
	log.hub = func() *Hub { return r.hub }
	r = newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{epochs: log})
	ws, _, err := r.dial(r.pair("mute"), tinyReceiveBuffer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	writeFrame(t, ws, proto.Hello{Protocol: 1})
	// Online comes with the registration, the epoch a store read later: a
	// close before the claim tells the cluster only once unregistered.
	eventually(t, "online, its epoch claimed", func() bool { return r.hub.Online("mute") && len(r.hub.Links()) == 1 })
	return r, log
}

// A link the server closes ends in the cluster as the server decides, not
// once its close handshake is over, which waits seconds on a phone that
// does not read: other nodes see the device offline as this one does. The
// link's end when it is unregistered tells the cluster nothing more.
func TestServerCloseEndsTheLinkInTheClusterAtOnce(t *testing.T) {
	t.Parallel()
	r, log := muteLinkInCluster(t)
	r.hub.Disconnect("mute", proto.CloseDeviceGone, "device deleted")
	eventually(t, "the cluster told of the link's end", func() bool { return len(log.calls()) > 0 })
	poll.Within(t, poll.Timeout+closeHandshakeBound, "the link unregistered", func() bool { return r.hub.Count() == 0 })
	got := log.calls()
	if len(got) != 1 || got[0].epoch != 1 || !got[0].registered {
		t.Fatalf("Ended calls %+v: want one, for epoch 1, made while the close handshake was under way", got)
	}
}

// A link the server is closing is no longer among the node's links, though
// its close handshake keeps it registered: the cluster heard it ended, and
// the sweep, which reopens the rows of this node's links that another node
// ended, would reopen its row with nothing left to end it again.
func TestClosingLinkIsNotListed(t *testing.T) {
	t.Parallel()
	r, _ := muteLinkInCluster(t)
	eventually(t, "the link listed", func() bool { return len(r.hub.Links()) == 1 })
	r.hub.Disconnect("mute", proto.CloseDeviceGone, "device deleted")
	// The phone does not read: its close handshake keeps the link
	// registered for seconds.
	n, links := r.hub.Count(), r.hub.Links()
	if n != 1 {
		t.Fatalf("%d links registered right after the close, want the closing one still in its handshake", n)
	}
	if len(links) != 0 {
		t.Fatalf("links %+v while the server closes the only one", links)
	}
	poll.Within(t, poll.Timeout+closeHandshakeBound, "the link unregistered", func() bool { return r.hub.Count() == 0 })
}

// stuckEpochs is a cluster whose database takes Ended and does not answer
// until release is closed.
type stuckEpochs struct {
	release chan struct{}
	mu      sync.Mutex
	next    uint64
}

func (s *stuckEpochs) Claim(store.Device) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return s.next, nil
}

func (s *stuckEpochs) Ended(store.Device, uint64) { <-s.release }

// The cluster hears of a link's end beside its close, not before it: the
// record is a database write, and a database that does not answer (the
// very cause of a close with 1013) must not hold up the phone's close
// frame.
func TestServerCloseDoesNotWaitForTheCluster(t *testing.T) {
	t.Parallel()
	epochs := &stuckEpochs{release: make(chan struct{})}
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{epochs: epochs})
	t.Cleanup(func() { close(epochs.release) }) // before the rig's own clean-up, which waits for the hub
	ws := r.connect(r.pair("pixel-1"))
	r.hub.Disconnect("pixel-1", proto.CloseDeviceGone, "device deleted")
	if code := closeAfterBacklog(t, ws); code != proto.CloseDeviceGone {
		t.Fatalf("close code %d, want %d", code, proto.CloseDeviceGone)
	}
}
