package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/simrelay/simrelay/internal/egress"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

const (
	// dispatchBatch is how many due deliveries one read of the index takes;
	// the dispatcher reads again as soon as it has handed them out.
	dispatchBatch = 64
	// storeRetryDelay is the wait after the store itself failed (disk full,
	// closing): long enough not to spin, short enough to resume soon after.
	storeRetryDelay = 30 * time.Second
	// pruneEvery is how often the deliveries log is trimmed.
	pruneEvery = time.Hour
	// maxErrorText bounds the error text a log line keeps.
	maxErrorText = 300
	// snippetBytes is how much of a failing receiver's answer the error shows.
	snippetBytes = 120
	// recordRetryEvery is how often an attempt's line that the database did
	// not take, because it did not answer, is written again (recorded).
	recordRetryEvery = 500 * time.Millisecond
)

var errRunning = errors.New("webhook: Run is already running for this service")

// Run delivers until ctx ends: one dispatcher feeding cfg.Workers workers,
// the recorder that waits for their attempts' lines to be durable, and the
// trimming of the deliveries log. Attempts under way when ctx ends are
// finished (within the timeout) and recorded; whatever is still due waits
// in the store for the next start. The connections kept for reuse are
// closed when it returns: each holds a socket to a receiver and two
// goroutines of the transport until its idle timeout otherwise.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errRunning
	}
	defer s.running.Store(false)
	jobs := make(chan store.WebhookDue)
	records := make(chan recording, s.cfg.Workers*recordsPerWorker)
	var wg, rec sync.WaitGroup
	rec.Go(func() { s.recordLoop(records) })
	for range s.cfg.Workers {
		wg.Go(func() { s.work(ctx, jobs, records) })
	}
	wg.Go(func() { s.prune(ctx) })
	s.dispatch(ctx, jobs)
	wg.Wait()
	close(records)
	rec.Wait()
	s.client.CloseIdleConnections()
	return nil
}

// recordsPerWorker bounds the attempts made and waiting for their line's
// commit, per worker: a worker hands the line to the store's group commit
// and takes its next delivery at once, so on a slow disk the lines of many
// attempts share one fsync instead of each worker waiting for its own. A
// worker waits only while Workers x recordsPerWorker lines wait already.
// Each holds one delivery (its body is the event's, at most an inbound
// message's JSON) until its commit.
const recordsPerWorker = 4

// recording is an attempt made, its line on its way to the store.
type recording struct {
	d        store.WebhookDue
	rec      store.AttemptRecord
	disabled *string // why the line's decision disabled the entry, set in the commit
	// decide makes the line from the attempt's outcome, in the commit; kept
	// to write the line again when the database did not answer.
	decide func(store.WebhookDelivery, *store.WebhookEntry) store.WebhookAttempt
	made   time.Time // when the line was handed to the store: its retries' clock
}

func (s *Service) work(ctx context.Context, jobs <-chan store.WebhookDue, records chan<- recording) {
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-jobs:
			if ctx.Err() != nil {
				s.done(d)
				s.release(d)
				return
			}
			// An attempt that started is finished and recorded even when
			// shutdown begins, so the next start neither repeats a delivered
			// attempt nor forgets a failed one; the timeout bounds the wait.
			r, ok := s.attempt(context.WithoutCancel(ctx), d)
			s.done(d)
			switch {
			case !ok:
				s.later(d) // the store failed
			case r.rec == nil: // nothing to record
				s.release(d)
			default:
				records <- r
			}
			s.Kick() // the entry and the company may start another attempt
		}
	}
}

// recordLoop waits for the attempts' lines, oldest first, logs each and
// lets its delivery be handed out again; it ends when records is closed
// and drained.
func (s *Service) recordLoop(records <-chan recording) {
	for r := range records {
		rec, err := s.recorded(r)
		switch {
		case errors.Is(err, store.ErrNotFound): // ended since the index was read
		case err != nil:
			s.log.Error("webhook outbox: record attempt", "delivery", r.d.ID, "err", err)
			s.later(r.d)
			continue
		default:
			s.logAttempt(rec, *r.disabled)
		}
		s.release(r.d)
		s.Kick() // the delivery's next due time moved
	}
}

// recorded waits for the attempt's line. A line the database did not take
// because it did not answer (PostgreSQL away for a moment: a restart, a
// failover) is written again every recordRetryEvery until twice the
// attempt's timeout after the line was first handed over. The attempt was
// made, and the receiver may have it: a line not written leaves the
// delivery under its claim's lease, and once the lease runs out this node
// or another attempts it again, a second attempt without any crash. The
// lease (postgres.Options.Lease) is six times the timeout, so the line is
// written well within it; past the retries the delivery goes on as before
// (at least once). The retries are timed from the line's own hand-over,
// not from when the loop reaches it: the lines wait their turn behind each
// other, and timed from the turn, a database that stays away would hold
// each waiting line for its full retries in turn, shutdown included.
func (s *Service) recorded(r recording) (store.WebhookAttempt, error) {
	rec, err := r.rec.Wait()
	for until := r.made.Add(2 * s.cfg.Timeout); errors.Is(err, store.ErrUnavailable) && time.Now().Before(until); {
		time.Sleep(recordRetryEvery)
		rec, err = s.store.RecordWebhookAttemptLater(r.d.ID, s.cfg.LogKeep, r.decide).Wait()
	}
	return rec, err
}

// outcome is what one attempt did.
type outcome struct {
	status   int // 0: no HTTP answer
	err      string
	duration time.Duration
	notSent  bool   // the entry was removed or is inactive: nothing was sent
	url      string // where it was sent
}

func (o outcome) delivered() bool { return o.status >= 200 && o.status < 300 }

// attempt makes one attempt at a delivery and hands its line to the store's
// group commit without waiting for it. It returns false when the store
// failed; a recording without rec has nothing to record.
func (s *Service) attempt(ctx context.Context, due store.WebhookDue) (recording, bool) {
	r := recording{d: due}
	id := due.ID
	job, err := s.store.WebhookJob(id)
	if errors.Is(err, store.ErrNotFound) {
		return r, true // ended since the index was read
	}
	if err != nil {
		s.log.Error("webhook outbox", "delivery", id, "err", err)
		return r, false
	}
	d := job.Delivery
	if d.NextAttemptAt.After(s.now()) {
		return r, true // an attempt recorded since the index was read moved it
	}
	var out outcome
	switch {
	case job.Closing:
		// The company asked to be removed (or was): it gets no push from
		// the mark on, though its removal has not taken the delivery yet.
		// Read with the delivery, in the same look.
		out = outcome{err: "not sent: the company is being removed", notSent: true}
	case job.Entry == nil:
		out = outcome{err: "not sent: the webhook entry was removed", notSent: true}
	case !job.Entry.Active:
		out = outcome{err: "not sent: the webhook entry is inactive", notSent: true}
	case isMailto(job.Entry.URL):
		out = s.sendMail(ctx, job.Entry.URL, d)
	case !s.cfg.AllowPrivate && !isHTTPS(job.Entry.URL):
		// Stored while --webhook-allow-private was on; now it is off.
		out = outcome{err: "not sent: http URLs need the server to run with --webhook-allow-private", notSent: true}
	default:
		secret := job.Secret
		if secret == "" {
			set, err := s.Settings(ctx, d.CompanyID)
			if err != nil {
				s.log.Error("webhook signing secret", "company", d.CompanyID, "err", err)
				return r, false
			}
			secret = set.Secret
		}
		out = s.send(ctx, job.Entry.URL, secret, d)
	}
	r.disabled = new(string)
	r.decide = func(d store.WebhookDelivery, e *store.WebhookEntry) store.WebhookAttempt {
		a, why := s.decide(d, e, out)
		*r.disabled = why
		return a
	}
	r.rec, r.made = s.store.RecordWebhookAttemptLater(id, s.cfg.LogKeep, r.decide), time.Now()
	return r, true
}

// logAttempt logs a recorded attempt.
func (s *Service) logAttempt(rec store.WebhookAttempt, disabled string) {
	attrs := []any{"delivery", rec.DeliveryID, "webhook_id", rec.WebhookID, "company", rec.CompanyID, "attempt", rec.Attempt, "status", rec.StatusCode}
	switch rec.State {
	case store.WebhookDelivered:
		s.log.Debug("webhook delivered", attrs...)
	case store.WebhookPending:
		s.log.Info("webhook attempt failed, will retry", append(attrs, "next_attempt_at", rec.NextAttemptAt, "err", rec.Error)...)
	default:
		s.log.Warn("webhook delivery failed, giving up", append(attrs, "err", rec.Error)...)
	}
	if disabled != "" {
		s.log.Warn("webhook entry disabled", "webhook_id", rec.WebhookID, "company", rec.CompanyID, "reason", disabled)
	}
}

// decide turns an outcome into the log line and updates the entry's health:
// a success clears its failure streak; a 410, or failing for DisableAfter
// without a success, disables it. It returns why it disabled the entry, if it did.
func (s *Service) decide(d store.WebhookDelivery, e *store.WebhookEntry, out outcome) (store.WebhookAttempt, string) {
	now := s.now().UTC()
	a := store.WebhookAttempt{StatusCode: out.status, Error: out.err, DurationMS: out.duration.Milliseconds(), CreatedAt: now}
	// An entry whose URL was changed during the attempt is not judged by
	// the old URL's answer; the delivery goes on to the new one.
	stale := e != nil && !out.notSent && e.URL != out.url
	if out.delivered() {
		a.State = store.WebhookDelivered
		if e != nil && !stale {
			e.FailingSince = time.Time{}
		}
		return a, ""
	}
	a.State = store.WebhookFailed
	if out.notSent || e == nil {
		return a, ""
	}
	if stale {
		if d.Attempts < len(s.cfg.Schedule) {
			a.State, a.NextAttemptAt = store.WebhookPending, now.Add(s.backoff(d.Attempts))
		}
		return a, ""
	}
	if e.FailingSince.IsZero() {
		e.FailingSince = now
	}
	var why, said string
	switch {
	case out.status == http.StatusGone:
		why, said = "the receiver answered 410 Gone", "; the webhook entry is disabled"
	case now.Sub(e.FailingSince) >= s.cfg.DisableAfter:
		why = "no successful delivery for " + problem.InWords(s.cfg.DisableAfter)
		said = "; the webhook entry is disabled after " + problem.InWords(s.cfg.DisableAfter) + " without a success"
	case d.Attempts < len(s.cfg.Schedule):
		a.State = store.WebhookPending
		a.NextAttemptAt = now.Add(s.backoff(d.Attempts))
	}
	// An entry its admin deactivated during the attempt stays as they
	// left it: the answer disables nothing, and no log says it did.
	if why == "" || !e.Active {
		return a, ""
	}
	e.Active, e.DisabledAt, e.DisabledReason = false, now, why
	a.Error = clip(a.Error + said)
	return a, why
}

// backoff is the wait after the failed attempt number attempt+1, with jitter.
func (s *Service) backoff(attempt int) time.Duration {
	d := s.cfg.Schedule[attempt]
	if s.cfg.Jitter > 0 {
		d += time.Duration(rand.Float64() * s.cfg.Jitter * float64(d))
	}
	return d
}

// send makes one signed POST of the delivery's body.
func (s *Service) send(ctx context.Context, target, secret string, d store.WebhookDelivery) outcome {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(d.Body))
	if err != nil {
		return outcome{err: clip("the URL cannot be requested: " + err.Error())}
	}
	stamp := s.now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(stamp, 10))
	req.Header.Set(HeaderSignature, Sign(secret, stamp, d.Body))
	req.Header.Set(HeaderEvent, d.EventType)
	req.Header.Set(HeaderDelivery, d.UUID)
	start := time.Now()
	res, err := s.client.Do(req)
	if err != nil {
		var ae *egress.AddressError
		if errors.As(err, &ae) {
			s.log.Warn("webhook address refused", "company", d.CompanyID, "webhook_id", d.WebhookID, "addr", ae.Addr, "range", ae.Range)
		}
		return outcome{url: target, err: describe(err, s.cfg.Timeout), duration: time.Since(start)}
	}
	// The answer's body is read within the attempt's deadline too: net/http
	// ends an ordinary body's reads with the request's context, but a 101
	// Switching Protocols hands over the raw connection as the body, which
	// nothing bounds, and a receiver that then sent nothing held the worker
	// (and its company's and entry's places, and the server's shutdown) for
	// good. Closing the body at the deadline ends any read.
	defer context.AfterFunc(ctx, func() { res.Body.Close() })()
	var head []byte
	if res.StatusCode != http.StatusSwitchingProtocols {
		// Read a bounded part of the answer so the connection can be reused;
		// keep its start to show in the log when the status is a failure.
		head = make([]byte, snippetBytes)
		n, _ := io.ReadFull(res.Body, head)
		head = head[:n]
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxResponseBytes-snippetBytes))
	}
	res.Body.Close()
	out := outcome{url: target, status: res.StatusCode, duration: time.Since(start)}
	if out.delivered() {
		return out
	}
	out.err = fmt.Sprintf("the receiver answered %d %s", res.StatusCode, http.StatusText(res.StatusCode))
	switch {
	case res.StatusCode >= 300 && res.StatusCode < 400:
		out.err += "; redirects are not followed"
		if loc := res.Header.Get("Location"); loc != "" {
			out.err += " (Location: " + printable(loc, snippetBytes) + ")"
		}
	case res.StatusCode == http.StatusGone:
		// decide says whether the answer disabled the entry.
	case res.StatusCode == http.StatusSwitchingProtocols:
		out.err += "; a delivery takes an HTTP answer, not a switch of protocol"
	default:
		if snippet := printable(string(head), snippetBytes); snippet != "" {
			out.err += ": " + snippet
		}
	}
	out.err = clip(out.err)
	return out
}

// describe turns a transport error into a log line's error text, without the
// request URL that net/http puts in front.
func describe(err error, timeout time.Duration) string {
	var ae *egress.AddressError
	if errors.As(err, &ae) {
		// The range, not the address, so the log cannot map the
		// server's internal names.
		return fmt.Sprintf("refused to connect: the host resolves to %s (allowed only with --webhook-allow-private)", egress.Described(ae.Range))
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		if dns.IsNotFound {
			return "the host name does not resolve"
		}
		return "the host name could not be resolved"
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("no answer within %s", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return clip(err.Error())
}

// printable keeps the first n bytes of s on one line, as valid UTF-8.
func printable(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

func clip(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	return strings.ToValidUTF8(s[:maxErrorText], "") + "…"
}

// prune trims the deliveries log now and then.
func (s *Service) prune(ctx context.Context) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		if n, err := s.store.PruneWebhookAttempts(s.now().Add(-s.cfg.LogAge), s.cfg.LogKeep); err != nil {
			s.log.Error("prune the webhook deliveries log", "err", err)
		} else if n > 0 {
			s.log.Debug("pruned the webhook deliveries log", "lines", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
