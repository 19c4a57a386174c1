package httpapi

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simrelay/simrelay/problem"
)

// Bounds of the bulk sends under way. A bulk send's 1 MiB of JSON becomes
// a thousand messages, their records and the commit's pages, several
// megabytes live while it is read, checked and stored, and the store
// commits one write at a time, so bulk sends sent together all held theirs
// while they waited for it. One API key may send --rate-general requests
// at once (100 by default, on as many connections): 60 bulk sends of one
// company at once held 350 MB of heap. A bulk send takes one of its
// company's places before its body is read; one that finds none waits for
// one, holding only its connection, for at most DefaultBulkWait, then
// answers 429. The places are each company's own, so a company whose
// uploads are slow (a place is held while the body arrives, at most the
// request's minute) keeps only its own bulk sends waiting.
const (
	// BulksPerCompany is how many bulk sends of one company are read,
	// checked and stored at once.
	BulksPerCompany = 2
	// DefaultBulkWait is the longest a bulk send waits for a place.
	DefaultBulkWait = 20 * time.Second
)

// Bounds of the MCP requests under way. A tool's answer is the route's
// JSON twice over (structuredContent and a text block), marshalled by the
// SDK into the result and again into the response: a read_conversation of
// 100 messages of 10,000 four-byte characters answers 8 MB and peaks near
// 45 MB of heap while it is built, and one API key may send --rate-general
// requests at once, each on its own connection: 32 of one company at once
// peaked at 1.6 GB (TestMeasureReadMemory), 100 would take about 5 GB. An
// MCP request takes one of its company's places once its body is read and
// checked, and holds it until its answer is written (at most the answer's
// write deadline, for a client that stops reading); one that finds none
// waits for one, holding only its connection and its body, for at most
// DefaultMCPWait, then answers 429.
const (
	// MCPPerCompany is how many MCP requests of one company run at once.
	MCPPerCompany = 4
	// DefaultMCPWait is the longest an MCP request waits for a place.
	DefaultMCPWait = 20 * time.Second
)

// Bounds of the list reads under way: GET /chat/messages,
// /chat/conversations, /automation/inbound-sms, /whatsapp/messages and
// /imessage/messages, the routes whose answers carry a page of message
// texts. A page is at most 100 messages, or 1,000 conversations up to 4 MiB
// of their last texts (store.ConversationsText), 50 inbound messages: up
// to 4 MB of texts read from the store, held until the answer is written
// (writeList writes it an item at a time, so the texts and a 32 KiB
// buffer), and one API key may send --rate-general requests at once, each
// on its own connection, for as long as their clients take to read them
// (at most the answer's write deadline): 100 conversation lists of 4 MB
// of one company at once peaked at 719 MB of heap when each answer was
// also marshalled whole, 59 MB now (TestMeasureReadMemory), 4 at a time.
// A list read takes one of its company's places once its query is read
// and holds it until its answer is written; one that finds none waits for
// one, holding only its connection, for at most DefaultReadWait, then
// answers 429 (each node of a cluster counts its own). A list of ordinary texts is
// read and written in a millisecond, so a company's reads wait for each
// other only when it asks for more than ReadsPerCompany at once; the
// places are each company's own, so another company's reads never wait
// for them. The reads of one record (a queued message, a message by its
// id, the latest inbound) take none.
const (
	// ReadsPerCompany is how many list reads of one company run at once.
	ReadsPerCompany = 4
	// DefaultReadWait is the longest a list read waits for a place.
	DefaultReadWait = 20 * time.Second
)

// companySlots counts the requests of a kind under way (bulk sends, MCP
// requests, list reads), by company: at most `most` of a company's at once.
type companySlots struct {
	most int
	wait time.Duration
	// busy is the refusal's message, after a wait of wait.
	busy string

	mu        sync.Mutex
	companies map[uint64]*companyTaken
	// waiting is how many requests wait for a place now, of every company.
	waiting atomic.Int64
}

// companyTaken is one company's requests under way (n); freed is closed,
// and replaced, each time one of them gives its place back, to wake that
// company's requests waiting for one, and no other company's.
type companyTaken struct {
	n     int
	freed chan struct{}
}

// newSlots is the places of a kind of request (what, as the refusal names
// them): most of a company's at once, a wait of at most wait for one
// (def when zero).
func newSlots(what string, most int, wait, def time.Duration) *companySlots {
	if wait <= 0 {
		wait = def
	}
	return &companySlots{most: most, wait: wait, companies: map[uint64]*companyTaken{},
		busy: fmt.Sprintf("Your company's %s under way are as many as may run at once (%d); send the next once one is answered.", what, most)}
}

// take waits for a place for a request of the company, at most b.wait
// and as long as ctx lasts, and returns the function that gives it back.
func (b *companySlots) take(ctx context.Context, companyID uint64) (release func(), err error) {
	var timeout <-chan time.Time // started once the request has to wait
	for {
		b.mu.Lock()
		c := b.companies[companyID]
		if c == nil {
			c = &companyTaken{freed: make(chan struct{})}
			b.companies[companyID] = c
		}
		if c.n < b.most {
			c.n++
			b.mu.Unlock()
			return func() { b.release(companyID) }, nil
		}
		freed := c.freed
		b.mu.Unlock()
		if timeout == nil {
			timer := time.NewTimer(b.wait)
			defer timer.Stop()
			timeout = timer.C
			b.waiting.Add(1)
			defer b.waiting.Add(-1)
		}
		select {
		case <-freed:
			continue
		case <-timeout:
		case <-ctx.Done(): // the client went away: the answer is for nobody
		}
		return nil, &problem.Error{Code: problem.RateLimited, RetryAfter: 5, Message: b.busy}
	}
}

// release gives a place back and wakes the company's requests waiting
// for one.
func (b *companySlots) release(companyID uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.companies[companyID]
	c.n--
	close(c.freed)
	if c.n <= 0 {
		delete(b.companies, companyID) // its waiters, woken, find no entry and make one
		return
	}
	c.freed = make(chan struct{})
}
