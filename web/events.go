package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Bounds of the live-update streams.
const (
	// DefaultStreamBuffer is how many events wait for one tab; a tab that
	// falls that far behind is dropped and reconnects (its page then reloads
	// what it shows), so one slow browser never holds the publisher.
	DefaultStreamBuffer = 64
	// DefaultStreamsPerSession caps the tabs of one session that stream at
	// once: a few windows are normal, hundreds are a leak or an attack.
	DefaultStreamsPerSession = 8
	// DefaultMaxStreams caps the streams of the whole server: each holds a
	// connection and a goroutine.
	DefaultMaxStreams = 2000
	// DefaultHeartbeat keeps proxies from closing an idle stream and checks
	// that the session still stands.
	DefaultHeartbeat = 25 * time.Second
)

// StreamConfig bounds the live-update streams; zero fields take the defaults.
type StreamConfig struct {
	Buffer, PerSession, Max int
	Heartbeat               time.Duration
}

func (c *StreamConfig) defaults() {
	if c.Buffer <= 0 {
		c.Buffer = DefaultStreamBuffer
	}
	if c.PerSession <= 0 {
		c.PerSession = DefaultStreamsPerSession
	}
	if c.Max <= 0 {
		c.Max = DefaultMaxStreams
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
}

// Broker fans message changes out to the open console tabs of their
// company. Publishing never blocks: it snapshots the subscribers under the
// lock and offers each event outside it.
type Broker struct {
	cfg StreamConfig
	mu  sync.Mutex
	// guarded by mu
	subs       map[uint64]map[*subscriber]struct{} // by company
	perSession map[string]int
	total      int
	closed     bool
	stop       chan struct{} // closed by Close
}

// subscriber is one tab's stream. events is written by publishers (never
// closed); gone is closed by the broker alone, once, when it drops the tab.
type subscriber struct {
	company uint64
	session string
	events  chan []byte
	gone    chan struct{}
	once    sync.Once
}

// NewBroker returns a broker with the given bounds.
func NewBroker(cfg StreamConfig) *Broker {
	cfg.defaults()
	return &Broker{cfg: cfg, subs: map[uint64]map[*subscriber]struct{}{}, perSession: map[string]int{}, stop: make(chan struct{})}
}

var errTooManyStreams = problem.New(problem.RateLimited, "Too many live views are open; close a few tabs.")

func (b *Broker) subscribe(company uint64, session string) (*subscriber, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, problem.New(problem.Unavailable, "The server is shutting down.")
	}
	if b.perSession[session] >= b.cfg.PerSession || b.total >= b.cfg.Max {
		return nil, errTooManyStreams
	}
	s := &subscriber{company: company, session: session, events: make(chan []byte, b.cfg.Buffer), gone: make(chan struct{})}
	if b.subs[company] == nil {
		b.subs[company] = map[*subscriber]struct{}{}
	}
	b.subs[company][s] = struct{}{}
	b.perSession[session]++
	b.total++
	return s, nil
}

func (b *Broker) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s.company][s]; !ok {
		return
	}
	delete(b.subs[s.company], s)
	if len(b.subs[s.company]) == 0 {
		delete(b.subs, s.company)
	}
	if b.perSession[s.session]--; b.perSession[s.session] <= 0 {
		delete(b.perSession, s.session)
	}
	b.total--
}

// Streams is how many tabs are streaming now.
func (b *Broker) Streams() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// liveMessage is a message as the pages' JavaScript draws it.
type liveMessage struct {
	ID        uint64 `json:"id"`
	QueueID   string `json:"queue_id,omitempty"`
	Device    string `json:"device"`
	Phone     string `json:"phone"`
	Direction string `json:"direction"`
	Text      string `json:"text"`
	SIMSlot   string `json:"sim_slot"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	CreatedAt string `json:"created_at"`
	// Channel is sms, whatsapp or imessage; NumberID names the WhatsApp
	// number or iMessage handle of the other two.
	Channel     string `json:"channel"`
	NumberID    string `json:"number_id,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	MediaURL    string `json:"media_url,omitempty"`
	// SendAt is when a scheduled SMS is due.
	SendAt string `json:"send_at,omitempty"`
	// Detail is what a delivered WhatsApp message's receipts added (read, played).
	Detail string `json:"detail,omitempty"`
}

func liveOut(m store.Message) liveMessage {
	out := liveMessage{ID: m.ID, Device: m.Device, Phone: m.Phone, Direction: m.Direction, Text: m.Text,
		SIMSlot: m.SIMSlot, Status: m.Status, Error: m.Error, CreatedAt: m.CreatedAt.UTC().Format(time.RFC3339),
		Channel: m.Channel, NumberID: m.NumberRef, ContentType: m.ContentType, MediaURL: m.MediaURL, Detail: m.Detail}
	if out.Channel == "" {
		out.Channel = "sms"
	}
	if !m.SendAt.IsZero() {
		out.SendAt = m.SendAt.UTC().Format(time.RFC3339)
	}
	if m.Direction == store.Outbound {
		out.QueueID = m.UUID
	}
	return out
}

// MessageChanged publishes a committed change to the company's tabs
// (sms.Watcher). It never blocks.
func (b *Broker) MessageChanged(m store.Message) {
	body, err := json.Marshal(liveOut(m))
	if err != nil {
		return
	}
	b.publish(m.CompanyID, body)
}

func (b *Broker) publish(company uint64, body []byte) {
	b.mu.Lock()
	targets := make([]*subscriber, 0, len(b.subs[company]))
	for s := range b.subs[company] {
		targets = append(targets, s)
	}
	b.mu.Unlock()
	for _, s := range targets {
		select {
		case s.events <- body:
		default:
			// Too slow: drop it; its EventSource reconnects and reloads.
			b.unsubscribe(s)
			s.once.Do(func() { close(s.gone) })
		}
	}
}

// Close ends every stream (server shutdown) and refuses new ones.
func (b *Broker) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.stop)
	}
}

// events is GET /console/events: one Server-Sent Events stream per tab.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	q, err := c.authenticate(r)
	if err != nil {
		// EventSource cannot read a body; 401 ends its retries, and the page
		// tells the user the session expired.
		writeJSON(w, http.StatusUnauthorized, c.toProblem(r, err))
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, problem.New(problem.Internal, "Streaming is not available."))
		return
	}
	b := c.deps.Broker
	sub, err := b.subscribe(q.p().CompanyID, q.sess.ID)
	if err != nil {
		pe := c.toProblem(r, err)
		writeJSON(w, pe.Status(), pe)
		return
	}
	defer b.unsubscribe(sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 3000\n\n")
	fl.Flush()
	tick := time.NewTicker(b.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-b.stop:
			return
		case <-sub.gone:
			return
		case <-tick.C:
			// A signed-out or revoked session loses its stream here.
			if _, err := c.deps.Accounts.ConsoleAuthenticate(r.Context(), q.sess.ID); err != nil {
				fmt.Fprint(w, "event: signedout\ndata: {}\n\n")
				fl.Flush()
				return
			}
			fmt.Fprint(w, ": ping\n\n")
			fl.Flush()
		case body := <-sub.events:
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", body)
			fl.Flush()
		}
	}
}
