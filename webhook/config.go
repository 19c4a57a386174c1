package webhook

import (
	"crypto/x509"
	"fmt"
	"time"
)

// Defaults, and why.
const (
	// DefaultWorkers bounds concurrent deliveries: enough that a few slow
	// receivers (each may hold a worker for Timeout) do not stall the rest.
	// Eight gives each company up to four at once (DefaultPerCompany) and
	// each entry two, so a company's one hanging entry leaves two for its
	// other entries and four for the other companies. A worker is a
	// goroutine and at most one connection.
	DefaultWorkers = 8
	// MaxWorkers keeps a typo from opening thousands of connections.
	MaxWorkers = 256
	// DefaultTimeout bounds one attempt, connect to last byte: the contract's 10 s.
	DefaultTimeout = 10 * time.Second
	// DefaultJitter adds up to this fraction to each retry delay, so the
	// retries of a burst that failed together do not return together.
	DefaultJitter = 0.1
	// DefaultDisableAfter disables an entry that kept failing without a
	// single success this long (the contract's 5 days): long enough to ride
	// out a long weekend's outage, short enough not to retry a dead URL forever.
	DefaultDisableAfter = 5 * 24 * time.Hour
	// DefaultLogAge and DefaultLogKeep bound the deliveries log: a month of
	// history, and at most this many lines per company, whichever is fewer.
	DefaultLogAge  = 30 * 24 * time.Hour
	DefaultLogKeep = 1000
	// DefaultMaxPending bounds one company's pending deliveries. A company
	// with all 20 entries down keeps about 500 events in retry (the schedule
	// spans about two days), which rides out a long outage at a steady few
	// hundred messages a day; a flood beyond it is logged as failed rather
	// than queued, so one tenant's dead receivers cannot grow the store
	// without end.
	DefaultMaxPending = 10000
	// DefaultMaxPendingBytes bounds the event bodies those deliveries share:
	// 64 MiB is about 1,100 events of the largest inbound text (10,000
	// characters of up to 6 bytes each once JSON-escaped, as <, > and &
	// are: \u003c), or hundreds of thousands of ordinary SMS.
	DefaultMaxPendingBytes = 64 << 20
	// MaxEntries is the contract's limit of webhook entries per company.
	MaxEntries = 20
	// maxResponseBytes is how much of a receiver's answer is read (and
	// discarded) so the connection can be reused; the rest is cut off.
	maxResponseBytes = 64 << 10
)

// DefaultPerCompany is the bound on one company's attempts under way when
// none is set: half the workers, rounded down, at least one. A tenant whose
// receivers all hang until the timeout then holds at most half the pool,
// and every other tenant's deliveries keep flowing through the rest; a
// healthy tenant alone still gets half the pool, ample for receivers that
// answer in milliseconds.
func DefaultPerCompany(workers int) int { return max(workers/2, 1) }

// entryBound is how many attempts one entry may have under way: maxPerEntry,
// but at most half the company's bound (at least one), so that one hanging
// entry leaves room for its company's other entries.
func (c Config) entryBound() int { return min(maxPerEntry, max(c.PerCompany/2, 1)) }

// DefaultSchedule returns the waits between attempts (the contract's: about
// 10 s, 1 min, 5 min, 30 min, 2 h, 6 h, 12 h, 24 h): quick help for a blip,
// then spread over about two days for an outage. A failure after the last
// wait fails the delivery.
func DefaultSchedule() []time.Duration {
	return []time.Duration{
		10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute,
		2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
	}
}

// Config tunes delivery. The zero value is the production default, with
// private addresses refused.
type Config struct {
	// Workers is the number of concurrent deliveries; DefaultWorkers when 0.
	Workers int
	// PerCompany bounds one company's attempts under way at once, so that
	// one tenant's hanging receivers never hold every worker;
	// DefaultPerCompany(Workers) when 0.
	PerCompany int
	// AllowPrivate lets webhook URLs use http and reach loopback, private and
	// link-local addresses (--webhook-allow-private): for self-hosters whose
	// receiver is on their own network, and for tests.
	AllowPrivate bool
	// Timeout bounds one attempt; DefaultTimeout when 0.
	Timeout time.Duration
	// Schedule is the wait before each retry; DefaultSchedule() when empty.
	Schedule []time.Duration
	// Jitter is the largest fraction added to a retry's wait; DefaultJitter
	// when 0, none when negative.
	Jitter float64
	// DisableAfter disables an entry failing without a success this long;
	// DefaultDisableAfter when 0.
	DisableAfter time.Duration
	// MaxPending and MaxPendingBytes bound one company's pending outbox;
	// the defaults when 0, no bound when negative.
	MaxPending      int
	MaxPendingBytes int64
	// LogAge and LogKeep bound the deliveries log; the defaults when 0.
	LogAge  time.Duration
	LogKeep int
	// MediaURLs signs the links of the files in *.received payloads
	// (media.Service); nil leaves the links out.
	MediaURLs MediaURLs
	// RootCAs, when set, replaces the system's roots for verifying receivers'
	// certificates (tests trust their httptest server this way).
	RootCAs *x509.CertPool
	// Poll, when set, is the longest the dispatcher sleeps between looks at
	// the outbox. On one node 0 (sleep until the next due time or a Kick):
	// every delivery is enqueued by this process, which kicks its own
	// dispatcher. On a cluster (DefaultClusterPoll) deliveries enqueued,
	// retried or left by a dead node's expired lease elsewhere are seen
	// within Poll, without a signal between the nodes. With Poll set the
	// dispatcher also claims no more deliveries than it has idle workers
	// (claimLimit), so no lease runs out while its delivery waits.
	Poll time.Duration
}

// DefaultClusterPoll is Poll on a cluster: a delivery enqueued on another
// node waits at most this long for a look, which keeps a webhook's delay
// within the contract's few seconds while an idle node claims from its
// outbox every two seconds: a few indexed statements, nothing PostgreSQL notices.
const DefaultClusterPoll = 2 * time.Second

// Validate checks the configuration; errors name the flag where there is one.
func (c Config) Validate() error {
	if c.Workers < 0 || c.Workers > MaxWorkers {
		return fmt.Errorf("--webhook-workers %d: want 1 to %d", c.Workers, MaxWorkers)
	}
	if c.PerCompany < 0 || c.PerCompany > MaxWorkers {
		return fmt.Errorf("--webhook-per-company %d: want 1 to %d", c.PerCompany, MaxWorkers)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("webhook timeout %s: must be positive", c.Timeout)
	}
	if c.Poll < 0 {
		return fmt.Errorf("webhook poll %s: must be positive", c.Poll)
	}
	for i, d := range c.Schedule {
		if d <= 0 {
			return fmt.Errorf("webhook retry %d waits %s: must be positive", i+1, d)
		}
	}
	if c.Jitter >= 1 {
		return fmt.Errorf("webhook jitter %g: must be below 1", c.Jitter)
	}
	if c.DisableAfter < 0 || c.LogAge < 0 || c.LogKeep < 0 {
		return fmt.Errorf("webhook limits must not be negative")
	}
	return nil
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.PerCompany == 0 {
		c.PerCompany = DefaultPerCompany(c.Workers)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if len(c.Schedule) == 0 {
		c.Schedule = DefaultSchedule()
	}
	switch {
	case c.Jitter == 0:
		c.Jitter = DefaultJitter
	case c.Jitter < 0:
		c.Jitter = 0
	}
	if c.DisableAfter == 0 {
		c.DisableAfter = DefaultDisableAfter
	}
	if c.LogAge == 0 {
		c.LogAge = DefaultLogAge
	}
	if c.LogKeep == 0 {
		c.LogKeep = DefaultLogKeep
	}
	switch {
	case c.MaxPending == 0:
		c.MaxPending = DefaultMaxPending
	case c.MaxPending < 0:
		c.MaxPending = 0 // the store's "no bound"
	}
	switch {
	case c.MaxPendingBytes == 0:
		c.MaxPendingBytes = DefaultMaxPendingBytes
	case c.MaxPendingBytes < 0:
		c.MaxPendingBytes = 0
	}
	return c
}
