package gateway

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/sms"
)

// Frames of every size cross a link intact both ways, including the sizes
// around the tiny buffers, the pooled buffer and the header's length forms;
// every frame the server wrote went out whole (linkIO never lost track of
// where frames start), and an idle link holds no buffer afterwards.
func TestLinkCarriesFramesOfEverySize(t *testing.T) {
	t.Parallel()
	sizes := []int{0, 1, 2, 11, 12, 13, 14, 15, 16, 17, 100, 125, 126, 127, 200, 497, 498, 499, 500, 511, 512, 513, 4000, 65535, 65536, 100000}
	links := make(chan *linkIO, 1)
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		sw := smallBuffers(w)
		ws, err := websocket.Accept(sw, r, nil)
		if err != nil {
			return
		}
		ws.SetReadLimit(-1)
		l, _ := hijacked(sw).(*linkIO)
		links <- l
		ctx := context.Background()
		for { // echo; the library answers pings and the close from Read
			typ, data, err := ws.Read(ctx)
			if err != nil {
				return
			}
			if err := ws.Write(ctx, typ, data); err != nil {
				return
			}
		}
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(-1)
	l := <-links
	if l == nil {
		t.Fatal("the hijacked loopback connection was not wrapped")
	}
	for _, n := range sizes {
		want := bytes.Repeat([]byte{byte('a' + n%26)}, n)
		if err := ws.Write(ctx, websocket.MessageBinary, want); err != nil {
			t.Fatalf("write %d bytes: %v", n, err)
		}
		_, got, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("read the echo of %d bytes: %v", n, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("the echo of %d bytes came back as %d bytes", n, len(got))
		}
	}
	// Pongs are the server's smallest frames; a reader takes them in.
	go func() {
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
	}()
	for range 3 {
		if err := ws.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := ws.Close(websocket.StatusNormalClosure, "done"); err != nil {
		t.Fatalf("close handshake: %v", err)
	}
	<-done // the handler has ended: the link's state is no longer written
	if l.unsynced.Load() || l.held != 0 || l.rest != 0 {
		t.Errorf("writes lost track of frames: unsynced %v, %d bytes held, %d bytes of a frame outstanding", l.unsynced.Load(), l.held, l.rest)
	}
}

// A link that carried a job and its reports, and has nothing more to do,
// holds no read buffer, no part of a frame, no window map and no flood
// limiter.
func TestIdleLinkHoldsNoBuffers(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	ws := r.connect(r.pair("pixel-1"))
	m, _, err := r.sms.Send(context.Background(), sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: "hello"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := readFrame(t, ws).(*proto.Send); !ok || s.ID != m.UUID {
		t.Fatalf("got %#v, want the job %s", s, m.UUID)
	}
	writeFrame(t, ws, proto.Ack{ID: m.UUID})
	writeFrame(t, ws, proto.Status{ID: m.UUID, Status: "sent"})
	if a, ok := readFrame(t, ws).(*proto.StatusAck); !ok || a.ID != m.UUID {
		t.Fatalf("got %#v, want the status_ack of %s", a, m.UUID)
	}

	c := r.hub.lookup("pixel-1")
	l, ok := c.sock.(*linkIO)
	if !ok {
		t.Fatalf("the link's connection is a %T, want a *linkIO", c.sock)
	}
	// The writer ends once the status_ack is out; taking its lock orders
	// this goroutine after the reader's and the writer's last use of l.
	eventually(t, "the writer done", func() bool {
		c.qmu.Lock()
		defer c.qmu.Unlock()
		return !c.writing
	})
	c.pumpMu.Lock()
	inflight := c.inflight
	c.pumpMu.Unlock()
	if l.rbuf != nil || l.held != 0 || l.unsynced.Load() || inflight != nil {
		t.Errorf("idle link holds: read buffer %v, %d bytes of a frame, window map %v (unsynced writes %v)", l.rbuf != nil, l.held, inflight, l.unsynced.Load())
	}
	// Its frames all answered the server's: no flood limiter was needed.
	if c.flood != nil {
		t.Error("a link that sent nothing unasked holds a flood limiter")
	}
}

// A phone that sends its hello in the same packet as its upgrade request
// (its bytes then sit in the HTTP server's reader when the link starts) is
// welcomed, and its link still reads through linkIO.
func TestHelloRightBehindTheUpgrade(t *testing.T) {
	t.Parallel()
	r := newRig(t, Config{})
	hello, err := proto.Encode(proto.Hello{Protocol: 1, AppVersion: "eager"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hello) > 125 {
		t.Fatalf("the hello is %d bytes; this test frames up to 125", len(hello))
	}
	// A masked text frame; a mask of zeros leaves the payload as it is.
	frame := append([]byte{0x81, 0x80 | byte(len(hello)), 0, 0, 0, 0}, hello...)
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &eagerConn{Conn: c, extra: frame}, nil
	}}}
	ws, _, err := r.dial(r.pair("pixel-1"), hc)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if w, ok := readFrame(t, ws).(*proto.Welcome); !ok || w.DeviceFingerprint != "pixel-1" {
		t.Fatalf("got %#v, want the welcome", w)
	}
	if c := r.hub.lookup("pixel-1"); c == nil {
		t.Fatal("not registered")
	} else if _, ok := c.sock.(*linkIO); !ok {
		t.Errorf("the link reads through a %T, want a *linkIO", c.sock)
	}
}

// eagerConn sends extra in the same write as the first bytes written.
type eagerConn struct {
	net.Conn
	extra []byte
}

func (c *eagerConn) Write(p []byte) (int, error) {
	if c.extra == nil {
		return c.Conn.Write(p)
	}
	b := append(append([]byte(nil), p...), c.extra...)
	c.extra = nil
	if _, err := c.Conn.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}
