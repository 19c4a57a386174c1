package client

import (
	"context"
	"strings"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
)

const timeLayout = "2006-01-02T15:04:05.000Z"

// handle answers one frame from the server.
func (p *Phone) handle(ctx context.Context, ws *websocket.Conn, data []byte) error {
	f, err := proto.Decode(data)
	if err != nil {
		p.cfg.Logger.Warn("ignoring a frame", "err", err)
		return nil // unknown types are ignored, as the protocol says
	}
	switch f := f.(type) {
	case *proto.Send:
		if f.ID == "" || len(f.ID) > proto.MaxJobIDBytes {
			// It names no job (PROTOCOL.md 8.3): an ack would be refused
			// and counted against the flood limit, and the job could not
			// be reported. Ignored, the link kept.
			p.cfg.Logger.Warn("ignoring a send without a job id", "id_bytes", len(f.ID))
			return nil
		}
		p.mu.Lock()
		seen := p.journal[f.ID]
		p.journal[f.ID] = true // journaled before the ack: the ack promises the job is kept
		p.mu.Unlock()
		err := write(ctx, ws, proto.Ack{ID: f.ID})
		// A job seen before is a resend after a lost ack: ack again, never send twice.
		// A new one goes to the sender after its ack, so its reports follow the
		// ack; it is journaled, so it goes there even when the ack was lost.
		if !seen && p.cfg.OnJob != nil {
			p.cfg.OnJob(*f)
		}
		if err != nil {
			return err
		}
	case *proto.StatusAck:
		p.answeredOne()
		p.mu.Lock()
		key := reportKey(f.ID, f.Status, f.Detail)
		if _, ok := p.reports[key]; ok {
			delete(p.reports, key)
			p.order = remove(p.order, key)
		}
		p.mu.Unlock()
	case *proto.InboundAck:
		p.answeredOne()
		p.mu.Lock()
		if _, ok := p.inbound[f.ClientID]; ok {
			delete(p.inbound, f.ClientID)
			p.inOrder = remove(p.inOrder, f.ClientID)
		}
		p.acked[f.ClientID] = *f
		waiters := p.waiters[f.ClientID]
		delete(p.waiters, f.ClientID)
		p.mu.Unlock()
		for _, w := range waiters {
			w <- *f
		}
		if p.cfg.OnInboundAck != nil {
			p.cfg.OnInboundAck(*f)
		}
	case *proto.Config:
		p.mu.Lock()
		if f.SelectedSIM != "" {
			p.selected = f.SelectedSIM
		}
		p.mu.Unlock()
		if p.cfg.OnConfig != nil {
			p.cfg.OnConfig(*f)
		}
	case *proto.Error:
		p.cfg.Logger.Warn("server error frame", "code", f.Code, "message", f.Message, "id", f.ID, "client_id", f.ClientID, "retry_after", f.RetryAfter)
		if p.cfg.OnError != nil {
			p.cfg.OnError(*f)
		}
		if f.ID != "" || f.ClientID != "" {
			p.answeredOne() // a report's refusal is its answer
		}
		if f.RetryAfter > 0 {
			// A temporary refusal (e.g. the company's storage budget for the
			// day is spent): the report stays, to be sent again later.
			p.resendLater(f, time.Duration(f.RetryAfter)*time.Second)
			return nil
		}
		// A refused report is dropped: sending it again would be refused
		// again. It is the oldest of the job's reports still waiting, as
		// answers keep the order of the reports (PROTOCOL.md 11.1); the
		// job's other reports have answers of their own. A refused ack
		// drops nothing.
		p.mu.Lock()
		if f.ID != "" && !strings.HasPrefix(f.Message, proto.TypeAck+": ") {
			for _, key := range p.order {
				if p.reports[key].ID == f.ID {
					delete(p.reports, key)
					p.order = remove(p.order, key)
					break
				}
			}
		}
		if f.ClientID != "" {
			if _, ok := p.inbound[f.ClientID]; ok {
				delete(p.inbound, f.ClientID)
				p.inOrder = remove(p.inOrder, f.ClientID)
			}
		}
		p.mu.Unlock()
	}
	return nil
}

// answeredOne tells the link's resend that a report was answered: a place
// in its window is free. Reports sent live are answered there too; they
// free places the resend did not take, so the window may hold a few more.
func (p *Phone) answeredOne() {
	p.mu.Lock()
	ch := p.answered
	p.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// resendLater sends the refused report again after wait if it is still
// pending and a link is up then; a new link resends it anyway.
func (p *Phone) resendLater(f *proto.Error, wait time.Duration) {
	time.AfterFunc(wait, func() {
		p.mu.Lock()
		var again proto.Frame
		if in, ok := p.inbound[f.ClientID]; ok && f.ClientID != "" {
			again = in
		}
		for _, k := range p.order {
			if r := p.reports[k]; r.ID == f.ID && f.ID != "" && again == nil {
				again = r
			}
		}
		ws := p.ws
		p.mu.Unlock()
		if again != nil && ws != nil {
			_ = write(context.Background(), ws, again)
		}
	})
}

func remove(list []string, v string) []string {
	for i, x := range list {
		if x == v {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// unacknowledged is what must be sent again on a new link, oldest first.
// p.mu must be held.
func (p *Phone) unacknowledged() []proto.Frame {
	out := make([]proto.Frame, 0, len(p.order)+len(p.inOrder))
	for _, k := range p.order {
		out = append(out, p.reports[k])
	}
	for _, k := range p.inOrder {
		out = append(out, p.inbound[k])
	}
	return out
}

// Report queues an outcome of a job and sends it now if the link is up;
// it is sent again on each new link until the server acknowledges it.
func (p *Phone) Report(id, status, errText string) {
	p.report(proto.Status{ID: id, Status: status, Error: errText})
}

// ReportDetail queues a delivered report with a detail (an agent's read
// receipt, PROTOCOL.md 16.2): a report of its own next to the plain
// delivered, acknowledged by a status_ack that echoes the detail.
func (p *Phone) ReportDetail(id, detail string) {
	p.report(proto.Status{ID: id, Status: proto.StatusDelivered, Detail: detail})
}

// reportKey names a report in the outbox: id, status and detail.
func reportKey(id, status, detail string) string {
	if detail == "" {
		return id + "\x00" + status
	}
	return id + "\x00" + status + "\x00" + detail
}

func (p *Phone) report(s proto.Status) {
	s.At = time.Now().UTC().Format(timeLayout)
	key := reportKey(s.ID, s.Status, s.Detail)
	p.mu.Lock()
	if _, ok := p.reports[key]; !ok {
		p.order = append(p.order, key)
	}
	p.reports[key] = s
	ws := p.ws
	p.mu.Unlock()
	if ws != nil {
		_ = write(context.Background(), ws, s)
	}
}

// Receive hands the server an SMS the phone received and returns a channel
// that yields the server's acknowledgement once it is stored. It is sent
// again on each new link until then.
func (p *Phone) Receive(in proto.Inbound) <-chan proto.InboundAck {
	if in.Channel == "" {
		in.Channel = proto.ChannelSMS
	}
	if in.ReceivedAt == "" {
		in.ReceivedAt = time.Now().UTC().Format(timeLayout)
	}
	ch := make(chan proto.InboundAck, 1)
	p.mu.Lock()
	if ack, ok := p.acked[in.ClientID]; ok {
		p.mu.Unlock()
		ch <- ack
		return ch
	}
	if _, ok := p.inbound[in.ClientID]; !ok {
		p.inOrder = append(p.inOrder, in.ClientID)
	}
	p.inbound[in.ClientID] = in
	p.waiters[in.ClientID] = append(p.waiters[in.ClientID], ch)
	ws := p.ws
	p.mu.Unlock()
	if ws != nil {
		_ = write(context.Background(), ws, in)
	}
	return ch
}

// Connected reports whether a link is up.
func (p *Phone) Connected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ws != nil
}

// Welcome returns the welcome of the current (or last) link.
func (p *Phone) Welcome() proto.Welcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.welcome
}

// SelectedSIM is the SIM the phone uses now, after any config push.
func (p *Phone) SelectedSIM() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.selected
}

// Pending counts reports and inbound messages not yet acknowledged.
func (p *Phone) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reports) + len(p.inbound)
}

// Journaled reports whether the phone took the job with this id.
func (p *Phone) Journaled(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.journal[id]
}

// Health makes h the phone's state: the hello of every later link carries
// it, and a live link gets it now as a health frame. The server stores at
// most one report per proto.HealthIntervalSeconds; an earlier one is
// refused with retry_after (to OnError), and the phone's next report, with
// its state then, takes its place.
func (p *Phone) Health(h proto.Health) {
	p.mu.Lock()
	hello := h
	p.cfg.Hello.Health = &hello
	ws := p.ws
	p.mu.Unlock()
	if ws != nil {
		_ = write(context.Background(), ws, h)
	}
}
