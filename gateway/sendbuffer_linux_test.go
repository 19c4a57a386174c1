//go:build linux

package gateway

import (
	"crypto/tls"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/connlimit"
	"github.com/simrelay/simrelay/internal/storetest"
)

// A phone that stops reading pins no more of the server's kernel memory
// than its link's send buffer: Linux would grow the socket's buffer up to
// net.ipv4.tcp_wmem's maximum (4 MiB by default) behind it, and thousands
// of such phones would press on the kernel's tcp_mem, which every
// connection shares. The queue here takes everything pushed and the stuck
// write waits a minute, so that only the socket bounds what the server
// wrote; the phone's receive buffer is small (tinyReceiveBuffer), so that
// what was written sits in the server's socket.
func TestStalledPhonePinsOnlyItsSendBuffer(t *testing.T) {
	t.Parallel()
	r := newRigServed(t, Config{QueueLen: 1000, QueueBytes: 64 << 20, WriteTimeout: time.Minute}, time.Now, storetest.Options{}, nil)
	ws, _, err := r.dial(r.pair("stalled"), tinyReceiveBuffer())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	writeFrame(t, ws, proto.Hello{Protocol: 1})
	eventually(t, "online", func() bool { return r.hub.Online("stalled", r.id("stalled")) })
	c := r.hub.lookup("stalled")
	// 8 MiB of 30 KB frames: twice what the kernel lets a socket's buffer
	// grow to by default.
	big := proto.Config{SelectedSIM: "SIM1", DeviceName: strings.Repeat("s", 30000), Status: "active"}
	for i := range 280 {
		if !c.send(big) {
			t.Fatalf("push %d was refused", i)
		}
	}
	// The writer stalled: the link's socket is full (it holds at least
	// the size asked for) and the queue stays as it is for 20 looks. A
	// pause of the writer alone, on a loaded machine, is waited out.
	last, still, sndbuf, queued := -1, 0, 0, 0
	eventually(t, "the link's socket full and its writer stalled", func() bool {
		q, _ := queuedBytes(r.hub, "stalled")
		if q == last {
			still++
		} else {
			last, still = q, 0
		}
		sndbuf, queued = socketMemory(t, c)
		return q > 0 && still >= 20 && queued >= DefaultSendBuffer
	})
	t.Logf("stalled: SO_SNDBUF %d, %d bytes queued in the kernel, %d bytes of frames left in the link's queue", sndbuf, queued, last)
	// Linux doubles the size asked for, room for its own bookkeeping.
	if limit := 2 * DefaultSendBuffer; sndbuf > limit {
		t.Errorf("the stalled link's socket may hold %d bytes, want at most %d", sndbuf, limit)
	}
	// What the socket holds passes its buffer by at most the last write's
	// packet.
	if limit := 2*DefaultSendBuffer + 64<<10; queued > limit {
		t.Errorf("the stalled link's socket holds %d bytes, want at most %d", queued, limit)
	}
}

// socketMemory reads the link's socket: the send buffer's size (SO_SNDBUF)
// and the bytes of memory the kernel holds queued for sending
// (SO_MEMINFO's wmem_queued).
func socketMemory(t *testing.T, c *conn) (sndbuf, queued int) {
	t.Helper()
	l, ok := c.sock.(*linkIO)
	if !ok {
		t.Fatal("the link's connection gives no access to its socket")
	}
	var info [unix.SK_MEMINFO_VARS]uint32
	var serr error
	err := l.raw.Control(func(fd uintptr) {
		size := uint32(unsafe.Sizeof(info))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO, uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&size)), 0)
		if errno != 0 {
			serr = errno
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		t.Fatalf("SO_MEMINFO: %v", err)
	}
	return int(info[unix.SK_MEMINFO_SNDBUF]), int(info[unix.SK_MEMINFO_WMEM_QUEUED])
}

// The send buffer reaches the socket under every connection a link may be
// served on: the TCP connection itself, the server's per-address count of
// connections (connlimit), the link's own reader (linkIO) and TLS.
func TestSendBufferReachesTheSocket(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	counted := connlimit.New(ln, connlimit.Config{PerClient: 10})
	for _, c := range []struct {
		name string
		wrap func(net.Conn) net.Conn
	}{
		{"tcp", func(c net.Conn) net.Conn { return c }},
		{"counted", func(c net.Conn) net.Conn { return c }},
		{"link", func(c net.Conn) net.Conn { return newLinkIO(c) }},
		{"tls", func(c net.Conn) net.Conn { return tls.Server(c, &tls.Config{}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			var server net.Conn
			if c.name == "counted" {
				server, err = counted.Accept()
			} else {
				server, err = ln.Accept()
			}
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			sock := c.wrap(server)
			if _, bare := sock.(*net.TCPConn); bare != (c.name == "tcp") {
				t.Fatalf("%s: the connection is a %T", c.name, sock)
			}
			if err := setSendBuffer(sock, 8192); err != nil {
				t.Fatal(err)
			}
			raw, err := server.(syscall.Conn).SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var got int
			var serr error
			if err := raw.Control(func(fd uintptr) { got, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) }); err != nil || serr != nil {
				t.Fatal(err, serr)
			}
			// Linux doubles the size asked for.
			if got != 2*8192 {
				t.Fatalf("SO_SNDBUF is %d, want %d", got, 2*8192)
			}
		})
	}
}
