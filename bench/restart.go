package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// restartPhase is what the restart phase measured.
type restartPhase struct {
	answered int64 // sends answered 2xx before the kill
	behind   int64 // of those, not on their phones when the server died
	lost     int64 // of those, never on a phone after the restart
	// listeningMs is from the kill to the new server listening (its store
	// opened and checked); linked from the kill to the phones' new links,
	// half of them and all of them.
	listeningMs, linkedP50Ms, linkedMaxMs float64
}

// restartSeq numbers the restart phase's messages, matched on the phones
// by text.
var restartSeq atomic.Int64

// firstAnswerWait bounds how long the restart phase streams sends past
// its length while none has been answered yet.
const firstAnswerWait = time.Minute

// restart streams sends into the server for sendFor, and on until one of
// them has been answered (firstAnswerWait at most), kills it with SIGKILL
// (a crash: nothing is flushed or closed) while they are in flight, starts
// it again on the same port and store, and measures how soon it listens,
// how soon every phone has linked again, and whether every send it
// answered 2xx before dying reaches its phone. srv becomes the new server.
// A kill before any answer would check nothing: on a slow or loaded
// machine a send can take longer than the phase's length.
func restart(ctx context.Context, srv **server, start func(listen string) (*server, error), f *fleet, api *apiClient, fps []string, senders int, sendFor time.Duration) (restartPhase, error) {
	var out restartPhase
	var mu sync.Mutex
	var answered []string
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// first is closed at the first send answered; stopped once every
	// sender has given up (each stops at a refusal).
	first, stopped := make(chan struct{}), make(chan struct{})
	var firstOnce sync.Once
	for w := range senders {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				text := fmt.Sprintf("restart %d", restartSeq.Add(1))
				fp := fps[(w*7919+i)%len(fps)]
				f.sent.Store(text, time.Now())
				code, _, err := api.do("POST", "/chat/send", map[string]string{"device_fingerprint": fp, "phone": "+15551234567", "message": text})
				if err != nil || code != http.StatusOK {
					// Refused, or cut by the kill: it may or may not be
					// stored, and is not counted either way.
					f.sent.Delete(text)
					return
				}
				mu.Lock()
				answered = append(answered, text)
				mu.Unlock()
				firstOnce.Do(func() { close(first) })
			}
		})
	}
	go func() {
		wg.Wait()
		close(stopped)
	}()
	if !sleep(ctx, sendFor) || !firstAnswer(ctx, first, stopped) {
		close(stop)
		wg.Wait()
		return out, ctx.Err()
	}
	old := *srv
	u, err := url.Parse(old.url)
	if err != nil {
		close(stop)
		wg.Wait()
		return out, err
	}
	killed := time.Now()
	_ = old.cmd.Process.Kill()
	_ = old.cmd.Wait()
	close(stop)
	wg.Wait()
	out.answered = int64(len(answered))
	out.behind = waiting(f, answered)

	// The phones' own reconnects may try the port meanwhile; the server
	// takes it back at once (SO_REUSEADDR).
	next, err := start(u.Host)
	if err != nil {
		return out, fmt.Errorf("bench: start the server again after the kill: %w", err)
	}
	*srv = next
	out.listeningMs = float64(time.Since(killed).Microseconds()) / 1000

	deadline := time.Now().Add(120 * time.Second)
	var links []time.Duration
	for {
		links = links[:0]
		for i := range fps {
			if at := f.upAt[i].Load(); at > killed.UnixNano() {
				links = append(links, time.Duration(at-killed.UnixNano()))
			}
		}
		if len(links) == len(fps) {
			break
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("bench: restart: only %d of %d phones linked again within 120s", len(links), len(fps))
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	out.linkedP50Ms, out.linkedMaxMs = pct(links, 50), pct(links, 100)

	deadline = time.Now().Add(60 * time.Second)
	for out.lost = waiting(f, answered); out.lost > 0 && time.Now().Before(deadline) && sleep(ctx, 10*time.Millisecond); out.lost = waiting(f, answered) {
	}
	for _, text := range answered {
		f.sent.Delete(text) // lost: not to be matched by a later phase
	}
	return out, nil
}

// firstAnswer waits until first is closed (a send answered), every sender
// stopped, or firstAnswerWait passed; it reports whether ctx is still on.
func firstAnswer(ctx context.Context, first, stopped <-chan struct{}) bool {
	t := time.NewTimer(firstAnswerWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-first:
	case <-stopped:
	case <-t.C:
	}
	return true
}

// waiting counts the texts not yet on a phone.
func waiting(f *fleet, texts []string) int64 {
	var n int64
	for _, text := range texts {
		if _, ok := f.sent.Load(text); ok {
			n++
		}
	}
	return n
}
