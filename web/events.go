package web

import (
	"crypto/aes"
	"crypto/cipher"
	cryptorand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Bounds of the live-update streams. A stream holds a connection, a
// goroutine and its buffered events, so each is counted against its
// session, its user, its company and the server: one tenant can never take
// the slots every other tenant's console needs.
const (
	// DefaultStreamBuffer is how many events wait for one tab; a tab that
	// falls that far behind is dropped and reconnects (its page then reloads
	// what it shows), so one slow browser never holds the publisher.
	DefaultStreamBuffer = 64
	// DefaultStreamsPerSession caps the tabs of one session that stream at
	// once: a few windows are normal, hundreds are a leak or an attack.
	DefaultStreamsPerSession = 8
	// DefaultStreamsPerUser caps one user's streams over all their sessions:
	// two browsers' worth, so signing in again and again gains nothing.
	DefaultStreamsPerUser = 16
	// DefaultStreamsPerCompany caps one company's streams: a tenth of the
	// server, room for a busy team (a hundred members with two tabs each),
	// while one company alone can never fill the server.
	DefaultStreamsPerCompany = 200
	// DefaultMaxStreams caps the streams of the whole server: each holds a
	// connection and a goroutine.
	DefaultMaxStreams = 2000
	// DefaultHeartbeat keeps proxies from closing an idle stream and checks
	// that the session still stands.
	DefaultHeartbeat = 25 * time.Second
	// DefaultStreamWriteTimeout bounds each write of a stream (an event or a
	// heartbeat): a client that stops reading fills the socket's buffers, its
	// next write fails after this long and the stream ends, so a stalled
	// client cannot hold its slot, its goroutine and its queue for ever. A
	// browser that reads takes a few kilobytes in far less.
	DefaultStreamWriteTimeout = 10 * time.Second
	// streamEventCheck is how long a stream's last check of its session
	// stands for the messages it passes on (events); older, the next message
	// checks it again first.
	streamEventCheck = time.Second
	// DefaultStreamRetry is how long at least a browser waits before it
	// opens a stream again after one ended (the stream's retry field, which
	// adds up to half as much again at random to each stream: retryOf): a
	// resync (Resync) or a restart costs a tab that long without live
	// updates, and a node's thousands of tabs come back spread over the
	// extra half rather than all at the same instant.
	DefaultStreamRetry = 3 * time.Second
	// changesKept is how long the broker remembers that a company's
	// messages changed, for the streams that open after their page was
	// drawn (Mark, missed): a stream that opens later than that after its
	// page catches up whether or not anything changed.
	changesKept = time.Minute
	// maxLiveTopics bounds the topics a stream names (liveTopics); more
	// read as none named: every change of the company.
	maxLiveTopics = 4
)

// retryOf is the reconnect delay one stream tells its browser: base and up
// to half of it again, at random, so that the tabs a resync or a restart
// ends at once (all of a node's, when its bus connection comes back) do
// not all open their streams again in the same instant.
func retryOf(base time.Duration) time.Duration {
	return base + rand.N(base/2+1)
}

// StreamConfig bounds the live-update streams; zero fields take the defaults.
type StreamConfig struct {
	Buffer                               int
	PerSession, PerUser, PerCompany, Max int
	Heartbeat, WriteTimeout              time.Duration
	// Retry is the reconnect delay each stream tells its browser
	// (DefaultStreamRetry); the server has no flag for it.
	Retry time.Duration
}

func (c *StreamConfig) defaults() {
	if c.Buffer <= 0 {
		c.Buffer = DefaultStreamBuffer
	}
	if c.PerSession <= 0 {
		c.PerSession = DefaultStreamsPerSession
	}
	if c.PerUser <= 0 {
		c.PerUser = DefaultStreamsPerUser
	}
	if c.PerCompany <= 0 {
		c.PerCompany = DefaultStreamsPerCompany
	}
	if c.Max <= 0 {
		c.Max = DefaultMaxStreams
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultStreamWriteTimeout
	}
	if c.Retry <= 0 {
		c.Retry = DefaultStreamRetry
	}
}

// Broker fans message changes out to the open console tabs of their
// company. Publishing never blocks: it snapshots the subscribers under the
// lock and offers each event outside it.
//
// A stream holds two things: a place in its company's fan-out, which the
// publisher takes away from a tab that falls behind, and a slot in the
// counts, which only the stream's own handler gives back, when it ends. A
// dropped tab whose handler is still stuck in a write therefore keeps its
// slot until the write deadline ends it.
type Broker struct {
	cfg StreamConfig
	mu  sync.Mutex
	// guarded by mu
	subs       map[uint64]map[*subscriber]struct{} // fan-out, by company
	perSession map[string]int
	perUser    map[uint64]int
	perCompany map[uint64]int
	total      int
	closed     bool
	stop       chan struct{} // closed by Close

	// leases count the streams of every node of a cluster; nil on one node
	// (stream_leases.go). Set before serving.
	leases StreamLeases
	log    *slog.Logger
	// now is the clock a live event reads a queued message's held_until
	// by (store.Message.WaitsUntil).
	now func() time.Time

	// A page marks (Mark) the broker's count of changes before it reads
	// what it draws; its stream, once subscribed, asks whether what the
	// page shows of its company changed since (missed). The count is of
	// every company's changes on the node, so a mark carries it sealed
	// (seal, a key of this broker's): a page learns nothing of other
	// companies' traffic from it, and a mark of another node, from before
	// a restart, or altered opens to no count of this broker's. Guarded by
	// mu: seq counts the changes told,
	// changed holds each company's last change of each topic it concerns
	// (liveTopics: its seq, and when on the monotonic clock), those older
	// than changesKept forgotten at most once a changesKept (swept), floor
	// the highest seq forgotten; mono reads that clock (time.Now; the
	// tests move it).
	mono    func() time.Time
	seal    cipher.Block
	seq     uint64
	changed map[topicKey]companyChange
	floor   uint64
	swept   time.Time
}

// topicKey is a topic (liveTopics) of a company's changes.
type topicKey struct {
	company uint64
	topic   topic
}

type companyChange struct {
	seq uint64
	at  time.Time
}

// The topics a change concerns, which a stream names (the of of
// /console/events, from its page's data-live-of) to be told to catch up
// only for a change of what its page shows: "" every change of the
// company (a stream that names none); "devices" a link of any of its
// devices (the devices page, the numbers list, the messages page's device
// list), "device:<fingerprint>" one device's (a number's agent);
// "sms:<fingerprint>" an SMS of the device (its messages page), and
// "number:<id>" a message of a WhatsApp number or iMessage handle (its
// page). A change of the company's messages was a catch-up for every page
// of the company: the devices page reloaded its badges after a message of
// any phone.
//
// The broker holds a topic as its kind and its id (the fingerprint or the
// number's id), never as the string a page names: every send and every
// report notes the topics of its message, and building "sms:<fingerprint>"
// for each cost an allocation where most companies have no tab to read it.
type topic struct {
	kind topicKind
	id   string // the fingerprint or the number's id; "" for topicAll and topicDevices
}

type topicKind uint8

const (
	topicAll     topicKind = iota // ""
	topicDevices                  // "devices"
	topicDevice                   // "device:<fingerprint>"
	topicSMS                      // "sms:<fingerprint>"
	topicNumber                   // "number:<id>"
)

// messageTopics are the topics of a change of a message of device
// (fingerprint) on channel, through number (a WhatsApp number's or an
// iMessage handle's id) for the two that are not SMS.
func messageTopics(device, channel, number string) [2]topic {
	if channel == "" || channel == "sms" {
		return [2]topic{{kind: topicAll}, {topicSMS, device}}
	}
	return [2]topic{{kind: topicAll}, {topicNumber, number}}
}

// deviceTopics are the topics of a change of the device's link.
func deviceTopics(fingerprint string) [3]topic {
	return [3]topic{{kind: topicAll}, {kind: topicDevices}, {topicDevice, fingerprint}}
}

// liveTopics are the topics a stream named (of: space-separated), each of
// a form it knows; none named, or any other (a page of an older script, a
// malformed one, too many), is every change of the company: a reload too
// many, never a change missed.
func liveTopics(of string) []topic {
	all := []topic{{kind: topicAll}}
	names := strings.Fields(of)
	if len(names) == 0 || len(names) > maxLiveTopics {
		return all
	}
	topics := make([]topic, 0, len(names))
	for _, t := range names {
		if t == "devices" {
			topics = append(topics, topic{kind: topicDevices})
			continue
		}
		kind, id, ok := strings.Cut(t, ":")
		if !ok || id == "" {
			return all
		}
		switch kind {
		case "device":
			topics = append(topics, topic{topicDevice, id})
		case "sms":
			topics = append(topics, topic{topicSMS, id})
		case "number":
			topics = append(topics, topic{topicNumber, id})
		default:
			return all
		}
	}
	return topics
}

// liveEvent is one event for a tab: its name (eventMessage, eventDevice)
// and its data, one line of JSON.
type liveEvent struct {
	name string
	body []byte
}

// The events a stream carries besides catchup, signedout and unavailable:
// a message as the page draws it (liveMessage), and a device's link coming
// or going (liveDevice).
const (
	eventMessage = "message"
	eventDevice  = "device"
)

// subscriber is one tab's stream. events is written by publishers (never
// closed); gone is closed once (once), by the broker when it drops the tab.
type subscriber struct {
	company, user uint64
	session       string
	events        chan liveEvent
	gone          chan struct{}
	once          sync.Once
	released      bool // guarded by Broker.mu
}

// NewBroker returns a broker with the given bounds; now (time.Now when nil)
// is the clock its events read a held message's opening by.
func NewBroker(cfg StreamConfig, now func() time.Time) *Broker {
	cfg.defaults()
	if now == nil {
		now = time.Now
	}
	return &Broker{cfg: cfg, now: now, subs: map[uint64]map[*subscriber]struct{}{}, perSession: map[string]int{},
		perUser: map[uint64]int{}, perCompany: map[uint64]int{}, stop: make(chan struct{}),
		mono: time.Now, seal: newSeal(), changed: map[topicKey]companyChange{}}
}

// Mark is the broker's count of changes now, sealed, for a page about to
// read what it draws: its stream hands it back (the since of
// /console/events), and learns from missed whether the page may lack a
// change. The sealed block is the count and 4 random bytes after 4 zero
// bytes: the same count gives a different mark each time, so two pages'
// marks do not even tell whether anything changed between them, and a
// mark that opens to other than zeros is none of this broker's.
func (b *Broker) Mark() string {
	b.mu.Lock()
	seq := b.seq
	b.mu.Unlock()
	var block [aes.BlockSize]byte
	binary.BigEndian.PutUint32(block[4:], rand.Uint32())
	binary.BigEndian.PutUint64(block[8:], seq)
	b.seal.Encrypt(block[:], block[:])
	return hex.EncodeToString(block[:])
}

// openMark is the count a mark of Mark sealed; false for a mark that is
// none of this broker's (malformed, another broker's, altered).
func (b *Broker) openMark(mark string) (uint64, bool) {
	var block [aes.BlockSize]byte
	if len(mark) != hex.EncodedLen(len(block)) {
		return 0, false
	}
	if _, err := hex.Decode(block[:], []byte(mark)); err != nil {
		return 0, false
	}
	b.seal.Decrypt(block[:], block[:])
	if binary.BigEndian.Uint32(block[:4]) != 0 {
		return 0, false
	}
	return binary.BigEndian.Uint64(block[8:]), true
}

// newSeal is a broker's key for its marks, random: a restart's marks are
// another broker's.
func newSeal() cipher.Block {
	key := make([]byte, 16)
	_, _ = cryptorand.Read(key) // never fails (crypto/rand)
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // a 16-byte key is always one AES takes
	}
	return block
}

// note counts a change of the company's messages or of its devices'
// links, of topics; the caller holds mu. It comes before the change is
// offered to the streams, so a stream subscribed too late to get it sees
// it in missed.
func (b *Broker) note(company uint64, topics []topic) {
	b.seq++
	now := b.mono()
	for _, t := range topics {
		b.changed[topicKey{company, t}] = companyChange{seq: b.seq, at: now}
	}
	if now.Sub(b.swept) < changesKept {
		return
	}
	b.swept = now
	for k, c := range b.changed {
		if now.Sub(c.at) >= changesKept {
			b.floor = max(b.floor, c.seq)
			delete(b.changed, k)
		}
	}
}

// missed says whether what a page shows of the company, the topics it
// named (liveTopics), may have changed since mark (Mark), the moment the
// page began to read it: a stream that subscribed after the change was
// told missed it. True too for a mark this broker cannot vouch for
// (another node's, one from before a restart, one older than what it
// remembers, a malformed one); false for none at all (a page that passed
// none).
func (b *Broker) missed(company uint64, mark string, topics []topic) bool {
	if mark == "" {
		return false
	}
	seq, ok := b.openMark(mark)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !ok || seq > b.seq || seq < b.floor {
		return true
	}
	for _, t := range topics {
		if c, ok := b.changed[topicKey{company, t}]; ok && c.seq > seq {
			return true
		}
	}
	return false
}

var (
	errTooManyStreams        = problem.New(problem.RateLimited, "Too many live views are open; close a few tabs.")
	errTooManyCompanyStreams = problem.New(problem.RateLimited, "Your company has too many live views open; close a few tabs or try again later.")
	errServerStreams         = problem.New(problem.RateLimited, "The server has too many live views open; try again later.")
)

func (b *Broker) subscribe(company, user uint64, session string) (*subscriber, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return nil, problem.New(problem.Unavailable, "The server is shutting down.")
	case b.perSession[session] >= b.cfg.PerSession, b.perUser[user] >= b.cfg.PerUser:
		return nil, errTooManyStreams
	case b.perCompany[company] >= b.cfg.PerCompany:
		return nil, errTooManyCompanyStreams
	case b.total >= b.cfg.Max:
		return nil, errServerStreams
	}
	s := &subscriber{company: company, user: user, session: session, events: make(chan liveEvent, b.cfg.Buffer), gone: make(chan struct{})}
	if b.subs[company] == nil {
		b.subs[company] = map[*subscriber]struct{}{}
	}
	b.subs[company][s] = struct{}{}
	b.perSession[session]++
	b.perUser[user]++
	b.perCompany[company]++
	b.total++
	return s, nil
}

// detach takes s out of the fan-out. The caller holds mu.
func (b *Broker) detach(s *subscriber) {
	delete(b.subs[s.company], s)
	if len(b.subs[s.company]) == 0 {
		delete(b.subs, s.company)
	}
}

// drop stops sending to a tab that fell behind and tells its handler to
// end; its slot stays counted until the handler releases it.
func (b *Broker) drop(s *subscriber) {
	b.mu.Lock()
	b.detach(s)
	b.mu.Unlock()
	s.once.Do(func() { close(s.gone) })
}

// release gives a stream's slot back: its handler's last act, once.
func (b *Broker) release(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	b.detach(s)
	dec := func(m map[uint64]int, k uint64) {
		if m[k]--; m[k] <= 0 {
			delete(m, k)
		}
	}
	if b.perSession[s.session]--; b.perSession[s.session] <= 0 {
		delete(b.perSession, s.session)
	}
	dec(b.perUser, s.user)
	dec(b.perCompany, s.company)
	b.total--
}

// Streams is how many streams hold a slot now: their handlers have not
// returned yet.
func (b *Broker) Streams() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// MessageChanged publishes a committed change to the company's tabs
// (sms.Watcher). It never blocks.
func (b *Broker) MessageChanged(m store.Message) {
	// Every send and every report of every company passes here, and most
	// companies have no console tab open: render only for a tab that can
	// take it. A tab whose stream opens after this learns it missed a
	// change (missed), and reloads what it shows.
	topics := messageTopics(m.Device, m.Channel, m.NumberRef)
	if !b.told(m.CompanyID, topics[:]) {
		return
	}
	body, err := json.Marshal(liveOut(m, b.now()))
	if err != nil {
		return
	}
	b.publish(m.CompanyID, liveEvent{eventMessage, body})
}

// liveDevice is a device's presence as the pages draw it: the badge of the
// device (its fingerprint) online or offline, as a reload would draw it.
type liveDevice struct {
	Device string `json:"device"`
	Online bool   `json:"online"`
}

// RenderDevice is the data of a "device" event: the device whose link
// came or went, and whether it is online now.
func RenderDevice(fingerprint string, online bool) []byte {
	body, _ := json.Marshal(liveDevice{Device: fingerprint, Online: online}) // a string and a bool always marshal
	return body
}

// DeviceChanged tells the company's tabs that a device's link came or
// went (its badge: online or not now). It never blocks. A page drawn
// before it and streaming after catches up (missed), as for a message.
func (b *Broker) DeviceChanged(company uint64, fingerprint string, online bool) {
	topics := deviceTopics(fingerprint)
	if !b.told(company, topics[:]) {
		return
	}
	b.publish(company, liveEvent{eventDevice, RenderDevice(fingerprint, online)})
}

// told notes a change of the company's messages or of its devices' links,
// of topics (note), and says whether any tab of the company has a stream
// open.
func (b *Broker) told(company uint64, topics []topic) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.note(company, topics)
	return len(b.subs[company]) > 0
}

func (b *Broker) publish(company uint64, ev liveEvent) {
	b.mu.Lock()
	targets := make([]*subscriber, 0, len(b.subs[company]))
	for s := range b.subs[company] {
		targets = append(targets, s)
	}
	b.mu.Unlock()
	for _, s := range targets {
		select {
		case s.events <- ev:
		default:
			// Too slow: drop it; its EventSource reconnects and reloads.
			b.drop(s)
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

// streamSession is the key a stream's session is counted under: a digest
// of the session's id, never the id itself. The id is the cookie that signs
// a browser in, which the store keeps only as a hash; on a cluster the key
// goes into every stream's lease in the database (stream_leases), where
// anyone who reads that table would have read the open tabs' cookies.
func streamSession(id string) string {
	sum := sha256.Sum256([]byte("console stream " + id))
	return hex.EncodeToString(sum[:])
}

// events is GET /console/events: one Server-Sent Events stream per tab.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	q, err := c.authenticate(r)
	if err != nil {
		// Any status but 200 ends an EventSource's retries, and it reads
		// neither the status nor the body: the page asks this URL again with
		// fetch to learn why (console.js), so the answer is the one every
		// console page gives, 401 for a session that ended, 503 for a store
		// that cannot answer (storeProblem), never "expired" for both.
		c.answerJSON(w, r, err)
		return
	}
	b := c.deps.Broker
	rc := http.NewResponseController(w)
	// Without write deadlines a client that never reads would hold the
	// stream for ever: refuse to stream at all.
	if err := rc.SetWriteDeadline(time.Now().Add(b.cfg.WriteTimeout)); err != nil {
		c.deps.Logger.Error("console: live view without write deadlines", "err", err)
		writeJSON(w, http.StatusInternalServerError, problem.New(problem.Internal, "Streaming is not available."))
		return
	}
	sub, err := b.subscribe(q.p().CompanyID, q.p().UserID, streamSession(q.sess.ID))
	if err != nil {
		c.answerJSON(w, r, err)
		return
	}
	defer b.release(sub)
	giveBack, err := b.lease(r.Context(), sub)
	if err != nil {
		c.answerJSON(w, r, err)
		return
	}
	defer giveBack()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	if r.ProtoMajor == 1 {
		// The connection ends with the stream: whatever a client left
		// unread in its buffers goes with it, never into an idle connection.
		h.Set("Connection", "close")
	}
	w.WriteHeader(http.StatusOK)
	// send writes one frame within the write timeout; an error (the client
	// stopped reading, or left) ends the stream.
	send := func(format string, args ...any) error {
		if err := rc.SetWriteDeadline(time.Now().Add(b.cfg.WriteTimeout)); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	if send("retry: %d\n\n", retryOf(b.cfg.Retry).Milliseconds()) != nil {
		return
	}
	// The page was drawn before its stream subscribed: what changed in
	// between came to no stream of the page's, so it reloads what it shows
	// (missed). Nothing changed of what the page shows (the topics it
	// names), nothing is said and nothing reloaded.
	if b.missed(q.p().CompanyID, query(r).Get("since"), liveTopics(query(r).Get("of"))) && send("event: catchup\ndata: {}\n\n") != nil {
		return
	}
	// ended checks the session: a signed-out or revoked session (signed
	// out elsewhere, the user removed, a password reset) loses its stream
	// with signedout; a session the store cannot check now is not signed
	// out: the page is told the server is unavailable and comes back. The
	// check is no request of the person's: it leaves the idle clock alone,
	// so an open tab left alone is signed out after the idle time as any
	// page is. True when the stream is to end.
	checked := c.deps.Now()
	ended := func() bool {
		checked = c.deps.Now()
		_, aerr := c.deps.Accounts.ConsoleCheck(r.Context(), q.sess.ID)
		if aerr == nil {
			return false
		}
		if pe := c.toProblem(r, aerr); pe.Code != problem.Unauthorized {
			if body, merr := json.Marshal(pe); merr == nil {
				_ = send("event: unavailable\ndata: %s\n\n", body)
			}
			return true
		}
		_ = send("event: signedout\ndata: {}\n\n")
		return true
	}
	tick := time.NewTicker(b.cfg.Heartbeat)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-b.stop:
			return
		case <-sub.gone:
			return
		case <-tick.C:
			if ended() {
				return
			}
			err = send(": ping\n\n")
		case ev := <-sub.events:
			// A message goes to a session checked within the last second:
			// a user removed, or signed out elsewhere, got the company's
			// messages until the next heartbeat, up to 25 s later. Once a
			// second bounds the store's reads to one a second a stream,
			// however many messages flow.
			if !c.deps.Now().Before(checked.Add(streamEventCheck)) && ended() {
				return
			}
			err = send("event: %s\ndata: %s\n\n", ev.name, ev.body)
		}
		if err != nil {
			return
		}
	}
}
