package gateway

// The link's write side: the bounded queue of frames for the phone, the
// welcome put first, the one writer, and the cut of a stuck write.

import (
	"context"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// send queues a frame without ever blocking: a full queue means the phone
// reads too slowly, and it is closed to resync from the store.
func (c *conn) send(f proto.Frame) bool { return c.enqueue(f, proto.CloseTooSlow) }

// enqueue queues a frame, or closes the link with overflow (4008, or 4029
// for the answers to a flood) when the queue holds QueueLen frames or the
// frame would take it over QueueBytes. A frame always fits an empty queue.
func (c *conn) enqueue(f proto.Frame, overflow int) bool {
	data, err := proto.Encode(f)
	if err != nil {
		c.hub.log.Error("encode frame", "err", err)
		return false
	}
	c.qmu.Lock()
	if c.closed() {
		c.qmu.Unlock()
		return false
	}
	cfg := c.hub.cfg
	if len(c.queue) >= cfg.QueueLen || (len(c.queue) > 0 && c.queued+len(data) > cfg.QueueBytes) {
		c.qmu.Unlock()
		if overflow == proto.CloseFlood {
			c.failFlood()
		} else {
			c.closeWith(overflow, "too slow: queue full")
		}
		return false
	}
	c.queue = append(c.queue, data)
	c.queued += len(data)
	start := !c.writing
	c.writing = true
	c.qmu.Unlock()
	if start && !c.spawn(taskWriter, c.writeLoop) {
		c.qmu.Lock() // the link is over and the hub stopped: nobody writes
		c.queue, c.queued, c.writing = nil, 0, false
		c.qmu.Unlock()
		return false
	}
	return true
}

// open puts the welcome ahead of whatever was queued while the link was
// being set up, and lets the writer run.
func (c *conn) open(welcome proto.Welcome) {
	data, err := proto.Encode(welcome)
	if err != nil {
		c.hub.log.Error("encode frame", "err", err)
		c.closeWith(int(websocket.StatusInternalError), "server error")
		return
	}
	c.qmu.Lock()
	c.queue = append([][]byte{data}, c.queue...)
	c.queued += len(data)
	c.qmu.Unlock()
	c.spawn(taskWriter, c.writeLoop) // writing is still true from newConn: this is the one writer; run has not ended, so never refused
}

// writeLoop is the link's one writer: it runs while frames wait and ends
// when the queue is empty, so an idle phone costs no writer goroutine and
// no queue memory.
func (c *conn) writeLoop() {
	h := c.hub
	// The write timeout is one timer for the writer's run, not a context per
	// frame: the library keeps the context of the last write for as long as
	// the link lives.
	var stuck *time.Timer
	defer func() {
		if stuck != nil {
			stuck.Stop()
		}
	}()
	for {
		c.qmu.Lock()
		if len(c.queue) == 0 || c.closed() {
			c.queue, c.queued, c.writing = nil, 0, false
			c.qmu.Unlock()
			return
		}
		data := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		c.queued -= len(data)
		c.qmu.Unlock()
		if stuck == nil {
			stuck = time.AfterFunc(h.cfg.WriteTimeout, c.cut)
		} else {
			stuck.Reset(h.cfg.WriteTimeout)
		}
		err := c.ws.Write(context.Background(), websocket.MessageText, data)
		stuck.Stop()
		if err != nil {
			c.end()
			c.qmu.Lock()
			c.queue, c.queued, c.writing = nil, 0, false
			c.qmu.Unlock()
			return
		}
	}
}

// cut ends a write that has waited WriteTimeout for the phone to read: the
// connection is closed under it, as the library does when a write's
// context ends.
func (c *conn) cut() {
	c.lost("a write waited " + c.hub.cfg.WriteTimeout.String() + " for the phone to read")
	c.sever()
}

// sever closes the link's connection under the library, at once: the
// library's CloseNow waits for a close handshake under way, up to 5 s for
// the close frame's write and 5 s more for the phone's answer.
func (c *conn) sever() {
	if c.sock != nil {
		_ = c.sock.Close()
		return
	}
	_ = c.ws.CloseNow()
}
