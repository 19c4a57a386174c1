package gateway

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/sms"
)

// BenchmarkLinkSend is one SMS send as its phone's link carries it, over a
// real WebSocket on loopback: the send is queued (sms.Service.Send, a real
// store opened without fsync) and kicks the device's link, which reads the
// queue and writes the job's send frame; the phone reads it and answers
// with an ack and a sent status, which the link reads, commits and answers
// (status_ack). One send at a time, each waited for to its status_ack, so
// that every send is one kick, one read of the queue and one frame each
// way. The phone is a lean client here, its frames built and read in
// reused buffers, so that allocs/op and B/op are nearly all the server's:
// the send's store work (the same in BenchmarkChatSend) and the link's.
//
//	go test -run '^$' -bench LinkSend -benchmem -benchtime 5000x ./gateway/
func BenchmarkLinkSend(b *testing.B) {
	r := newRig(b, Config{})
	ws := r.connect(r.pair("pixel-1"))
	ws.SetReadLimit(1 << 20)
	in := sms.SendInput{CompanyID: r.company, Device: "pixel-1", Phone: "+15551234567", Message: "Your code is 123456", SIMSlot: "SIM1"}
	p := &benchPhone{ws: ws, buf: make([]byte, 0, 4096), out: make([]byte, 0, 256)}
	// A send that never comes ends the benchmark: the phone's reads have
	// no context of their own (the library's watch of a read's context
	// costs allocations of the phone's), and this cuts the link under them.
	p.stuck = time.AfterFunc(time.Hour, func() { ws.CloseNow() })
	defer p.stuck.Stop()
	b.ReportAllocs()
	cpu := processCPUTime()
	b.ResetTimer()
	for i := range b.N {
		m, _, err := r.sms.Send(context.Background(), in, nil)
		if err != nil {
			b.Fatalf("send %d: %v", i, err)
		}
		p.carry(b, m.UUID)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPUTime()-cpu)/float64(b.N), "cpu-ns/op")
	// Every ack's place in the window is freed before the status that
	// follows it is answered, so nothing is left in flight.
	c := r.hub.lookup("pixel-1")
	poll.Within(b, 5*time.Second, "the link's window empty", func() bool {
		c.pumpMu.Lock()
		defer c.pumpMu.Unlock()
		return len(c.inflight) == 0
	})
}

// benchPhone is the phone of BenchmarkLinkSend: it reads each frame into
// one buffer and writes its answers from another.
type benchPhone struct {
	ws    *websocket.Conn
	buf   []byte      // the frame read
	out   []byte      // the frame written
	stuck *time.Timer // cuts the link when a frame is 5 s late
}

// carry reads the send frame of the job id, acks it, reports it sent and
// reads the status_ack.
func (p *benchPhone) carry(b *testing.B, id string) {
	p.stuck.Reset(5 * time.Second)
	if !bytes.Contains(p.read(b), []byte(`{"type":"send","id":"`+id+`"`)) {
		b.Fatalf("got %s, want the send frame of %s", p.buf, id)
	}
	p.write(b, `{"type":"ack","id":"`, id, `"}`)
	p.write(b, `{"type":"status","id":"`, id, `","status":"sent"}`)
	if !bytes.HasPrefix(p.read(b), []byte(`{"type":"status_ack","id":"`+id+`","status":"sent"}`)) {
		b.Fatalf("got %s, want the status_ack of %s", p.buf, id)
	}
}

func (p *benchPhone) read(b *testing.B) []byte {
	_, rd, err := p.ws.Reader(context.Background())
	if err != nil {
		b.Fatalf("read: %v", err)
	}
	p.buf = p.buf[:0]
	for {
		if len(p.buf) == cap(p.buf) {
			p.buf = append(p.buf, 0)[:len(p.buf)]
		}
		n, err := rd.Read(p.buf[len(p.buf):cap(p.buf)])
		p.buf = p.buf[:len(p.buf)+n]
		if err == io.EOF {
			return p.buf
		}
		if err != nil {
			b.Fatalf("read: %v", err)
		}
	}
}

func (p *benchPhone) write(b *testing.B, parts ...string) {
	p.out = p.out[:0]
	for _, s := range parts {
		p.out = append(p.out, s...)
	}
	if err := p.ws.Write(context.Background(), websocket.MessageText, p.out); err != nil {
		b.Fatalf("write: %v", err)
	}
}

// processCPUTime is the CPU time the process has used, user and system.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLinkThroughput is a healthy phone reading as fast as it can
// while its link writes frames the size of a long SMS's send (7 KB) and
// near the largest (60 KB), over a real WebSocket on loopback: what the
// link's socket send buffer (Config.SendBuffer) lets through where the
// round trip costs nothing. The frames are queued ahead of the writer, up
// to 4 MiB at a time.
//
//	go test -run '^$' -bench LinkThroughput -benchtime 2000x ./gateway/
func BenchmarkLinkThroughput(b *testing.B) {
	for _, size := range []int{7000, 60000} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			r := newRig(b, Config{QueueLen: 1 << 20, QueueBytes: 1 << 30})
			ws := r.connect(r.pair("pixel-1"))
			ws.SetReadLimit(1 << 20)
			c := r.hub.lookup("pixel-1")
			frame := proto.Config{SelectedSIM: "SIM1", DeviceName: strings.Repeat("s", size), Status: "active"}
			data, _ := proto.Encode(frame)
			b.SetBytes(int64(len(data)))
			p := &benchPhone{ws: ws, buf: make([]byte, 0, 64<<10)}
			stuck := time.AfterFunc(time.Minute, func() { ws.CloseNow() })
			defer stuck.Stop()
			b.ResetTimer()
			go func() {
				for range b.N {
					for q, open := queuedBytes(r.hub, "pixel-1"); open && q > 4<<20; q, open = queuedBytes(r.hub, "pixel-1") {
						time.Sleep(100 * time.Microsecond)
					}
					if !c.send(frame) {
						return
					}
				}
			}()
			for range b.N {
				p.read(b)
			}
		})
	}
}
