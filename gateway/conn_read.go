package gateway

// The link's read side: the reader's loop, each frame handled, intake
// refusals, and the words for a frame that could not be decoded.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/problem"
)

// readLoop handles the phone's frames. Store writes start here, on the
// link's own goroutine, and its answers wait on its own answerer
// (answers.go), so one slow phone slows only itself. Between frames it
// waits in awaitFrame, on a stack small enough for the runtime to shrink
// to its least: an idle link's goroutine costs 2 KB of stack, not the 4 KB
// a wait inside the library's Read takes.
func (c *conn) readLoop() {
	l, _ := c.sock.(*linkIO)
	for {
		if l != nil {
			l.awaitFrame()
		}
		if !c.readFrame() {
			return
		}
	}
}

// readFrame reads and handles one frame; false ends the link. It is not
// inlined, so that its frame is off the stack while readLoop waits.
//
//go:noinline
func (c *conn) readFrame() bool {
	ctx := context.Background()
	buf, err := readMessage(ctx, c.ws)
	if err != nil || c.closed() {
		if buf != nil {
			frameBuffers.Put(buf)
		}
		return false // the answerer may have closed the link (flood, a store fault)
	}
	// Nothing keeps the frame's bytes once it is handled: what is kept of
	// it (the decoded frame, an answer's values) is copied out of them.
	defer frameBuffers.Put(buf)
	data := *buf
	c.touch()
	c.frames.Add(1)
	f, err := proto.Decode(withoutNUL(data))
	if errors.Is(err, proto.ErrUnknownType) {
		if !c.charge() {
			return false
		}
		refusal := proto.Error{Code: "unknown_frame", Message: fmt.Sprintf("Unknown frame type %q; the frame was ignored.", echo(frameType(data)))}
		c.answerNow(func() { c.answerError(refusal) })
		return true
	}
	if err != nil {
		c.fail(proto.CloseProtocolError, "protocol_error", "A frame could not be read: "+frameProblem(err))
		return false
	}
	c.handling.Store(true)
	defer func() {
		c.handling.Store(false)
		c.quiet() // the reader reads again: its wait on the frame is not the phone's silence
	}()
	return c.handle(ctx, f)
}

// frameBuffers hold each frame a link reads, from its read until it is
// handled: the library's Read made a buffer for every frame, 512 bytes for
// an ack, two allocations of a send's link for its ack and its status.
var frameBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// readMessage reads the phone's next message into a buffer of
// frameBuffers, as the library's Read reads it into one of its own (its
// Reader, read to the end as io.ReadAll reads: the same bytes, the same
// errors, the read limit's included).
func readMessage(ctx context.Context, ws *websocket.Conn) (*[]byte, error) {
	_, r, err := ws.Reader(ctx)
	if err != nil {
		return nil, err
	}
	buf := frameBuffers.Get().(*[]byte)
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // room to read into, grown as append grows
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			*buf = b
			if err == io.EOF {
				return buf, nil
			}
			frameBuffers.Put(buf)
			return nil, err
		}
	}
}

// handle takes one frame; false ends the link. An ack or status goes to the
// store's group commit and is answered once durable, in order, by the
// answerer (answers.go). Reports are charged to the flood limit only when
// they answer nothing the server sent (flood.go), which is known once the
// commit says whether they moved their job.
func (c *conn) handle(ctx context.Context, f proto.Frame) bool {
	h := c.hub
	switch f := f.(type) {
	// A report's answer waits for its commit, up to 3 x max_inflight of
	// them per link (answers.go), so it keeps only what it answers with,
	// each value cut as an error frame repeats it (a valid one is shorter):
	// not the frame, whose id or error text may take most of 64 KiB.
	case *proto.Ack:
		r := h.intake.Ack(ctx, c.dev, f.ID)
		id := echo(f.ID)
		c.later(func() {
			moved, err := r.Wait()
			// A refused ack (no such job) frees the slot too: the phone will not ack it again.
			inflight := c.settle(id)
			if (err != nil || !(moved || inflight)) && !c.charge() {
				return
			}
			c.refused(err, "ack", proto.Error{ID: id})
		})
	case *proto.Status:
		r := h.intake.Status(ctx, c.dev, *f)
		ack := proto.StatusAck{ID: echo(f.ID), Status: echo(f.Status), Detail: echo(f.Detail)}
		c.later(func() {
			moved, err := r.Wait()
			if err != nil && !c.charge() {
				return
			}
			if c.refused(err, "status", proto.Error{ID: ack.ID}) {
				return
			}
			if inflight := c.settle(ack.ID); !(moved || inflight) && !c.charge() {
				return
			}
			c.send(&ack) // the closure's own: no copy on the heap
		})
	case *proto.Inbound:
		if !c.charge() {
			return false
		}
		var ack proto.InboundAck
		var err error
		if isAgentChannel(f.Channel) && h.agents != nil {
			ack, err = h.agents.Inbound(ctx, c.dev, *f)
		} else {
			ack, err = h.intake.Inbound(ctx, c.dev, *f)
		}
		about := proto.Error{ClientID: echo(f.ClientID)} // not the frame, which may wait behind reports
		c.answerNow(func() {
			if !c.refused(err, "inbound", about) {
				c.send(&ack)
			}
		})
		return !c.closed()
	case *proto.Health:
		// Unasked, so charged; the store refuses reports closer together
		// than the health interval, so a phone cannot make it write more.
		if !c.charge() {
			return false
		}
		err := h.devices.Health(ctx, c.dev, *f)
		c.answerNow(func() {
			if notFound(err) {
				err = nil // deleted while connected: its close is on the way
			}
			c.refused(err, "health", proto.Error{})
		})
		return !c.closed()
	default:
		c.fail(proto.CloseProtocolError, "protocol_error", "A phone may not send "+f.FrameType()+" here.")
		return false
	}
	return true
}

// refused reports a failed intake: a client error goes back as an error
// frame naming the report (the link goes on, and the phone drops the
// report, or keeps it to resend when the frame carries retry_after); a
// server fault closes the link (1011, or 1013 when the database does not
// answer: storeFault) so the phone retries after reconnecting (its report
// is not lost: it was never acknowledged).
func (c *conn) refused(err error, what string, about proto.Error) bool {
	if err == nil {
		return false
	}
	if pe, ok := problem.As(err); ok {
		about.Code, about.Message, about.Field, about.RetryAfter = string(pe.Code), what+": "+pe.Message, pe.Field, pe.RetryAfter
		c.answerError(about)
		return true
	}
	c.storeFault(err, "intake failed", "device", c.dev.Fingerprint, "frame", what, "id", about.ID, "client_id", about.ClientID)
	return true
}

// frameType is the type a frame names, "" when it names none.
func frameType(data []byte) string {
	var env struct {
		Type any `json:"type"`
	}
	_ = json.Unmarshal(data, &env)
	t, _ := env.Type.(string)
	return t
}

// frameProblem says in one sentence why a frame could not be decoded.
func frameProblem(err error) string {
	var typ *json.UnmarshalTypeError
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &typ) && typ.Field != "":
		want, got := jsonKind(typ.Type.Kind()), typ.Value
		// A number that does not fit comes as "number <its digits>": never
		// repeat the digits, which may be most of a 64 KiB frame.
		if digits, ok := strings.CutPrefix(got, "number "); ok {
			if want == "number" {
				if wholeKind(typ.Type.Kind()) && strings.ContainsAny(digits, ".eE") {
					// 10.0 or 1e1 for an integer field: not out of range.
					return fmt.Sprintf("%s must be a whole number, written in digits without a fraction or an exponent.", typ.Field)
				}
				return fmt.Sprintf("%s is out of range.", typ.Field)
			}
			got = "number"
		}
		return fmt.Sprintf("%s must be a JSON %s, not %s.", typ.Field, want, echo(got))
	case errors.As(err, &syntax):
		return "the frame is not valid JSON."
	default:
		return "the frame must be a JSON object with a string type."
	}
}

// wholeKind says whether k is one of Go's integer kinds.
func wholeKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return "number"
}
