package gateway

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// An idle phone's link holds as little as the WebSocket library allows: the
// library reads and writes through bufio buffers of the hijacked connection,
// which it keeps for the link's whole life. Those are made as small as bufio
// and a frame header allow, and the connection under them (linkIO) takes a
// pooled buffer only while bytes pass: nearly every link is idle nearly all
// the time, and an idle link then holds no I/O buffer at all.
const (
	// tinyBufferSize is the size of the library's own bufio buffers: bufio's
	// smallest reader, and room for the longest frame header (14 bytes), so
	// that a frame's header always starts the first chunk written.
	tinyBufferSize = 16
	// ioBufferSize is a pooled buffer: one read takes in what the phone sent
	// (several small frames at once under load), one write sends a frame
	// whole. Frames are small: a send is a few hundred bytes.
	ioBufferSize = 512
	// smallBufferSize replaces net/http's 4 KiB read and write buffers where
	// the connection offers no raw access to wait for data without a buffer.
	smallBufferSize = 512
)

var ioBuffers = sync.Pool{New: func() any { b := make([]byte, ioBufferSize); return &b }}

// smallBuffers wraps w so that the hijacked connection gets small buffers.
func smallBuffers(w http.ResponseWriter) http.ResponseWriter {
	if _, ok := w.(http.Hijacker); !ok {
		return w
	}
	return &smallBufferWriter{ResponseWriter: w}
}

// hijacked is the connection w handed over, nil when it handed over none
// (or w did not come from smallBuffers).
func hijacked(w http.ResponseWriter) net.Conn {
	if s, ok := w.(*smallBufferWriter); ok {
		return s.conn
	}
	return nil
}

type smallBufferWriter struct {
	http.ResponseWriter
	conn net.Conn // the hijacked connection as the library got it; nil before
}

func (s *smallBufferWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := s.ResponseWriter.(http.Hijacker).Hijack()
	if err != nil {
		return nil, nil, err
	}
	s.conn = conn
	if l := newLinkIO(conn); l != nil {
		// Bytes the client sent right behind its upgrade request (a phone
		// sends its hello as soon as it reads the 101) sit in the old
		// reader: the link reads them first.
		l.seed(brw.Reader)
		s.conn = l
		l.br = bufio.NewReaderSize(l, tinyBufferSize)
		return l, bufio.NewReadWriter(l.br, bufio.NewWriterSize(l, tinyBufferSize)), nil
	}
	// Without raw access, keep the old reader when it holds such bytes,
	// rather than lose them.
	if brw.Reader.Buffered() > 0 {
		return conn, brw, nil
	}
	return conn, bufio.NewReadWriter(bufio.NewReaderSize(conn, smallBufferSize), bufio.NewWriterSize(conn, smallBufferSize)), nil
}

// Unwrap lets http.ResponseController reach the original writer.
func (s *smallBufferWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// linkIO is a link's connection under the library's tiny bufio buffers.
//
// Reads wait until the socket has data before they take a pooled buffer,
// and give it back once the library has taken every byte of it.
//
// Writes arrive in bufio's chunks: a frame longer than the buffer comes as
// its first 16 bytes, then the rest. The first chunk is held (in the
// struct, no buffer of its own) until the rest arrives, so that a frame
// still goes out in one write, as it did with a buffer that held it whole.
// Only a chunk known to start a frame is held: linkIO follows frame
// boundaries, and once a write does not fit them it only passes bytes on.
//
// Read is called by the library's one reader, Write under its one writer's
// lock: the read and the write state each have one user at a time.
type linkIO struct {
	net.Conn
	raw syscall.RawConn

	rbuf *[]byte // read, not yet taken; from ioBuffers, nil when empty
	r, w int     // (*rbuf)[r:w] is unread

	br      *bufio.Reader // the library's reader over l: what it holds, the link has read
	onPong  func()        // told of each pong awaitFrame takes; nil: none are taken
	amu     sync.Mutex    // orders awaitFrame's look at the read state before stopAwaiting
	stopped atomic.Bool   // stopAwaiting was called

	// wmu is held from the first byte of each frame the library writes to
	// its last, so that ping writes between frames.
	wmu      sync.Mutex
	head     [tinyBufferSize]byte // the start of a frame, waiting for its rest
	held     int                  // bytes in head
	rest     int64                // bytes of the current frame not yet written
	unsynced atomic.Bool          // writes left the frame boundaries: pass them on as they come, and write no ping
}

// uncount gives a registered link's connection its place back in the
// listener's bound of connections per client address (internal/connlimit),
// when the connection is counted there: a registered link is its device's
// one link, bounded by the company's devices, and a fleet behind one NAT
// address must not meet a bound meant for anonymous connections.
func uncount(sock net.Conn) {
	if l, ok := sock.(*linkIO); ok {
		sock = l.Conn
	}
	if u, ok := sock.(interface{ Uncount() }); ok {
		u.Uncount()
	}
}

// recount takes a link's place in that bound again once it is no longer
// its device's one link (replaced, or closed by the server): its close
// handshake may keep the connection open for up to 10 s, and a client
// replacing its link again and again would otherwise hold any number of
// such connections from one address.
func recount(sock net.Conn) {
	if l, ok := sock.(*linkIO); ok {
		sock = l.Conn
	}
	if r, ok := sock.(interface{ Recount() }); ok {
		r.Recount()
	}
}

// newLinkIO wraps conn, or returns nil when conn gives no raw access to its
// socket (one that reads through TLS, say).
func newLinkIO(conn net.Conn) *linkIO {
	sc, ok := conn.(syscall.Conn)
	if !ok || !rawReads {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &linkIO{Conn: conn, raw: raw}
}

// seed makes what br holds the first bytes the link reads.
func (l *linkIO) seed(br *bufio.Reader) {
	n := br.Buffered()
	if n == 0 {
		return
	}
	buf := ioBuffers.Get().(*[]byte)
	if n > len(*buf) {
		ioBuffers.Put(buf)
		b := make([]byte, n) // a pipelined burst: read once, then dropped
		buf = &b
	}
	pending, _ := br.Peek(n) // buffered already: no read, no error
	l.rbuf, l.r, l.w = buf, 0, copy(*buf, pending)
}

// Read takes unread bytes, reading more when none are left.
func (l *linkIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if l.rbuf == nil {
		if len(p) >= ioBufferSize {
			return l.Conn.Read(p) // as much as a pooled buffer: read into p itself
		}
		if err := l.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*l.rbuf)[l.r:l.w])
	l.r += n
	if l.r == l.w {
		if cap(*l.rbuf) == ioBufferSize {
			ioBuffers.Put(l.rbuf)
		}
		l.rbuf, l.r, l.w = nil, 0, 0
	}
	return n, nil
}

// fill waits until the socket has data, then reads it into a pooled buffer.
func (l *linkIO) fill() error {
	var (
		buf  *[]byte
		n    int
		rerr error
	)
	err := l.raw.Read(func(fd uintptr) bool {
		buf = ioBuffers.Get().(*[]byte)
		n, rerr = readRaw(fd, *buf)
		if rerr == syscall.EAGAIN {
			ioBuffers.Put(buf) // nothing yet: wait for data without a buffer
			buf = nil
			return false
		}
		return true
	})
	switch {
	case err == nil && rerr == nil && n > 0:
		l.rbuf, l.r, l.w = buf, 0, n
		return nil
	case buf != nil:
		ioBuffers.Put(buf)
	}
	switch {
	case err != nil:
		return err
	case rerr != nil:
		return &net.OpError{Op: "read", Net: l.LocalAddr().Network(), Source: l.LocalAddr(), Addr: l.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	}
	return io.EOF
}

// awaitFrame waits until the phone has sent something for the library to
// read, taking the pongs that come before it (telling onPong of each), and
// returns at once when bytes already wait. The link's reader calls it
// between frames, so that an idle link waits here, on a shallow stack that
// the runtime shrinks, and not deep inside the library's Read. The library
// would take a pong itself and then wait for the next frame where it is, so
// an idle phone's answer to each ping would leave its reader deep again.
// A read error is left for the library's Read to find.
func (l *linkIO) awaitFrame() {
	for {
		l.amu.Lock()
		idle := !l.stopped.Load() && l.onPong != nil && !l.unsynced.Load() && l.rbuf == nil && l.br != nil && l.br.Buffered() == 0
		l.amu.Unlock()
		if !idle {
			return
		}
		took := false
		err := l.raw.Read(func(fd uintptr) bool {
			if l.stopped.Load() {
				return true // the library reads on another goroutine now
			}
			buf := ioBuffers.Get().(*[]byte)
			defer ioBuffers.Put(buf)
			n, err := peekRaw(fd, (*buf)[:maxPongSize])
			switch {
			case err == syscall.EAGAIN:
				return false
			case err != nil || n == 0:
				return true // the library's Read reports it
			}
			size, pong := pongSize((*buf)[:n])
			switch {
			case !pong:
				return true
			case size > n:
				return false // the rest of the pong is on its way
			}
			_, err = readRaw(fd, (*buf)[:size])
			took = err == nil
			return true
		})
		if err != nil || !took {
			return
		}
		l.onPong()
	}
}

// stopAwaiting makes awaitFrame return, now and from now on, and take no
// more pongs: the library's Close reads the socket on a goroutine of its
// own, after this returns.
func (l *linkIO) stopAwaiting() {
	l.amu.Lock()
	l.stopped.Store(true)
	l.amu.Unlock()
}

// maxPongSize is the longest pong a phone sends: a masked control frame
// with at most 125 bytes of payload.
const maxPongSize = 2 + 4 + 125

// pongSize reads the frame that starts p: whether it is a phone's pong
// (final, masked, at most 125 bytes of payload, as RFC 6455 has control
// frames), and if so its length, header included, which may pass len(p).
// Anything else, a malformed pong included, is the library's to read.
func pongSize(p []byte) (int, bool) {
	if len(p) == 0 || p[0] != 0x8a { // FIN, no reserved bits, opcode pong
		return 0, false
	}
	if len(p) < 2 {
		return 2, true
	}
	if p[1]&0x80 == 0 || p[1]&0x7f > 125 {
		return 0, false
	}
	return 2 + 4 + int(p[1]&0x7f), true
}

// pingFrame is the server's ping: final, unmasked, no payload.
var pingFrame = []byte{0x89, 0x00}

// ping writes a ping between the library's frames, within timeout. It
// writes none (false) while a frame is being written, and once writes have
// left the frame boundaries; the link's pongs are then the library's to read.
func (l *linkIO) ping(timeout time.Duration) (bool, error) {
	if !l.wmu.TryLock() {
		return false, nil
	}
	defer l.wmu.Unlock()
	if l.unsynced.Load() {
		return false, nil
	}
	if err := l.Conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return false, err
	}
	_, err := l.Conn.Write(pingFrame)
	if derr := l.Conn.SetWriteDeadline(time.Time{}); err == nil {
		err = derr
	}
	return true, err
}

// Write passes p on, holding the first chunk of a frame until its rest
// comes, and wmu from a frame's first byte to its last.
func (l *linkIO) Write(p []byte) (int, error) {
	if l.unsynced.Load() || len(p) == 0 {
		return l.Conn.Write(p)
	}
	if l.rest == 0 && l.held == 0 {
		l.wmu.Lock()
	}
	n, err := l.write(p)
	if l.unsynced.Load() || (l.rest == 0 && l.held == 0) {
		l.wmu.Unlock()
	}
	return n, err
}

func (l *linkIO) write(p []byte) (int, error) {
	if l.rest == 0 { // p starts a frame
		size := frameSize(p)
		switch {
		case size == 0 || size < int64(len(p)):
			l.unsynced.Store(true) // not one frame's start: stop following frames
		case size > int64(len(p)) && len(p) <= len(l.head):
			l.held = copy(l.head[:], p)
			l.rest = size - int64(len(p))
			return len(p), nil
		default:
			l.rest = size - int64(len(p))
		}
		return l.Conn.Write(p)
	}
	if l.rest -= int64(len(p)); l.rest < 0 {
		l.unsynced.Store(true)
	}
	if l.held == 0 {
		return l.Conn.Write(p)
	}
	held := l.held
	l.held = 0
	n, err := l.writeJoined(l.head[:held], p)
	return max(n-held, 0), err
}

// writeJoined writes a then b in one write.
func (l *linkIO) writeJoined(a, b []byte) (int, error) {
	if len(a)+len(b) <= ioBufferSize {
		buf := ioBuffers.Get().(*[]byte)
		defer ioBuffers.Put(buf)
		n := copy(*buf, a)
		n += copy((*buf)[n:], b)
		return l.Conn.Write((*buf)[:n])
	}
	bufs := net.Buffers{a, b}
	n, err := bufs.WriteTo(l.Conn)
	return int(n), err
}

// frameSize is the length of the WebSocket frame whose header starts p,
// header included (RFC 6455, section 5.2); 0 when p holds no whole header.
func frameSize(p []byte) int64 {
	if len(p) < 2 {
		return 0
	}
	size, header := int64(p[1]&0x7f), int64(2)
	switch size {
	case 126:
		if len(p) < 4 {
			return 0
		}
		size, header = int64(binary.BigEndian.Uint16(p[2:])), 4
	case 127:
		if len(p) < 10 {
			return 0
		}
		v := binary.BigEndian.Uint64(p[2:])
		if v > 1<<62 {
			return 0
		}
		size, header = int64(v), 10
	}
	if p[1]&0x80 != 0 {
		header += 4 // masked
	}
	return header + size
}

// setSendBuffer sets the kernel send buffer (SO_SNDBUF) of the socket under
// sock, which also ends the kernel's autotuning of it: through the TCP
// connection's own SetWriteBuffer, or, under a wrapper (the listener's
// count of connections per address, linkIO, TLS), on the socket's
// descriptor. errors.ErrUnsupported: sock has no socket to reach.
func setSendBuffer(sock net.Conn, size int) error {
	for {
		switch c := sock.(type) {
		case nil:
			return errors.ErrUnsupported
		case *linkIO:
			return setSendBufferRaw(c.raw, size)
		case interface{ SetWriteBuffer(int) error }:
			return c.SetWriteBuffer(size)
		case syscall.Conn:
			raw, err := c.SyscallConn()
			if err != nil {
				return err
			}
			return setSendBufferRaw(raw, size)
		case interface{ NetConn() net.Conn }: // *tls.Conn
			sock = c.NetConn()
		default:
			return errors.ErrUnsupported
		}
	}
}
