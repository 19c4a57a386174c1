package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// A device's slow upload (a slow link may take an hour over 16 MiB) holds
// only its device's place: the company's other agents upload meanwhile,
// where one place a company made every agent's received files wait for
// it. A second upload of the same device is refused while its first is
// under way (simrelay-agent uploads one file at a time).
func TestADevicesSlowUploadHoldsOnlyItsOwnPlace(t *testing.T) {
	t.Parallel()
	s, devs := companiesService(t, Config{}, 2)
	a, b := devs[0][0], devs[0][1]
	slow := startUpload(t, s, a, "wa:a/0")

	if m, _, err := s.Put(context.Background(), b, hello("wa:b/0")); err != nil || m.DeviceID != b.ID || m.Size != 5 {
		t.Fatalf("an upload of another device of the company while one is slow: %+v %v, want it stored", m, err)
	}
	_, _, err := s.Put(context.Background(), a, hello("wa:a/1"))
	const want = "The device has 1 upload under way, the most at once; retry in 5 seconds."
	if pe, ok := problem.As(err); !ok || pe.Code != problem.RateLimited || pe.RetryAfter != busyRetrySeconds || pe.Message != want {
		t.Fatalf("a second upload of the device while its first is under way: %v, want 429 rate_limited with Retry-After, %q", err, want)
	}

	slow.finish(t)
	if _, _, err := s.Put(context.Background(), a, hello("wa:a/1")); err != nil {
		t.Fatalf("the device's next upload once its slow one arrived: %v, want it stored", err)
	}
}

// A company's uploads under way are bounded still, at 4 of its devices'
// (DefaultUploadsPerCompany), so that one tenant's agents never hold every
// arriving place: one more, of a fifth device, is refused, while another
// company's upload is not; once one arrives the company's place is free
// again.
func TestACompanysUploadsUnderWayAreBounded(t *testing.T) {
	t.Parallel()
	const most = 4
	s, devs := companiesService(t, Config{}, most+1, 1)
	acme, other := devs[0], devs[1][0]
	var slow []*slowUpload
	for i, d := range acme[:most] {
		slow = append(slow, startUpload(t, s, d, fmt.Sprintf("wa:%d/0", i)))
	}

	last := acme[most]
	_, _, err := s.Put(context.Background(), last, hello("wa:last/0"))
	want := fmt.Sprintf("The company has %d uploads under way, the most at once; retry in 5 seconds.", most)
	if pe, ok := problem.As(err); !ok || pe.Code != problem.RateLimited || pe.RetryAfter != busyRetrySeconds || pe.Message != want {
		t.Fatalf("an upload of a company with %d under way: %v, want 429 rate_limited with Retry-After, %q", most, err, want)
	}
	if _, _, err := s.Put(context.Background(), other, hello("wa:other/0")); err != nil {
		t.Fatalf("another company's upload meanwhile: %v, want it stored", err)
	}

	slow[0].finish(t)
	if _, _, err := s.Put(context.Background(), last, hello("wa:last/0")); err != nil {
		t.Fatalf("the refused upload again once one of the company's arrived: %v, want it stored", err)
	}
	for _, u := range slow[1:] {
		u.finish(t)
	}
}

// hello is a small upload of key.
func hello(key string) Upload {
	return Upload{Key: key, ContentType: "text/plain", Length: 5, Body: strings.NewReader("hello")}
}

// slowUpload is an upload whose body sent its first bytes and then waits,
// as a slow link's does, until finish sends its end.
type slowUpload struct {
	body *io.PipeWriter
	done chan error // Put's answer
}

// startUpload starts an upload of dev and returns once the service has read
// its first bytes: the upload is under way, holding its places. The test
// fails if the upload is refused instead.
func startUpload(t *testing.T, s *Service, dev store.Device, key string) *slowUpload {
	t.Helper()
	r, w := io.Pipe()
	u := &slowUpload{body: w, done: make(chan error, 1)}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _, err := s.Put(context.Background(), dev, Upload{Key: key, ContentType: "video/mp4", Length: -1, Body: r})
		r.CloseWithError(io.ErrClosedPipe) // a refusal read nothing: free the writer below
		u.done <- err
	}()
	t.Cleanup(func() {
		w.CloseWithError(errors.New("the test ended"))
		<-ended
	})
	read := make(chan struct{})
	go func() {
		if _, err := w.Write(bytes.Repeat([]byte("v"), 1000)); err == nil {
			close(read)
		}
	}()
	select {
	case <-read:
	case err := <-u.done:
		t.Fatalf("upload %s of device %d: %v, want it under way", key, dev.ID, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("upload %s of device %d: its first bytes not read within 10 s", key, dev.ID)
	}
	return u
}

// finish sends the upload's end and checks that it is stored.
func (u *slowUpload) finish(t *testing.T) {
	t.Helper()
	u.body.Close()
	select {
	case err := <-u.done:
		if err != nil {
			t.Fatalf("a slow upload once its body ended: %v, want it stored", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a slow upload not answered within 10 s of its body's end")
	}
}

// Of the server's arriving places, the last SpoolsKept go one a company:
// a company with uploads arriving takes another place only while more are
// free, and is told so; a company with none takes any free place. With
// none free, a company's upload waits, and is refused, while no other
// company holds two places more than its own; a company holding none
// takes the place of the slowest upload of one holding two, which is cut
// at its next read with 429 rate_limited.
func TestArrivingPlacesKeptForCompaniesWithNone(t *testing.T) {
	t.Parallel()
	s, devs := companiesService(t, Config{Spools: 4, ChunkTimeout: 300 * time.Millisecond}, 3, 1, 1, 1)
	acme := devs[0]
	first := startUpload(t, s, acme[0], "wa:a0/0")
	startUpload(t, s, acme[1], "wa:a1/0") // 3 places free: beyond the 2 kept

	_, _, err := s.Put(context.Background(), acme[2], hello("wa:a2/0"))
	const kept = "The company has 2 uploads arriving, and the server keeps its last 2 places for companies with none; retry in 5 seconds."
	if pe, ok := problem.As(err); !ok || pe.Code != problem.RateLimited || pe.RetryAfter != busyRetrySeconds || pe.Message != kept {
		t.Fatalf("a third upload of a company while only the kept places are free: %v, want 429 rate_limited with Retry-After, %q", err, kept)
	}
	startUpload(t, s, devs[1][0], "wa:b/0")
	startUpload(t, s, devs[2][0], "wa:c/0")
	_, _, err = s.Put(context.Background(), acme[2], hello("wa:a2/0"))
	const full = "The server has 4 uploads arriving, the most at once; retry in 5 seconds."
	if pe, ok := problem.As(err); !ok || pe.Code != problem.RateLimited || pe.Message != full {
		t.Fatalf("an upload of a company holding 2 places with every place held, the others' 1 each: %v, want 429 rate_limited, %q", err, full)
	}

	// A company with none: the oldest of acme's two uploads (each read as
	// much, so the fewest bytes a second) yields its place at its next read.
	done := make(chan error, 1)
	go func() { _, _, err := s.Put(context.Background(), devs[3][0], hello("wa:d/0")); done <- err }()
	poll.Until(t, "an upload yields its place", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for sp := range s.spools {
			if sp.yielded.Load() {
				return sp.company == acme[0].CompanyID
			}
		}
		return false
	})
	go first.body.Write([]byte("more")) // its next read
	select {
	case err := <-first.done:
		const yielded = "The server's 4 places for arriving uploads were all held, and this upload, the slowest of a company holding more of them, gave its place to another company's; retry in 5 seconds."
		if pe, ok := problem.As(err); !ok || pe.Code != problem.RateLimited || pe.RetryAfter != busyRetrySeconds || pe.Message != yielded {
			t.Fatalf("the upload that yielded its place: %v, want 429 rate_limited with Retry-After, %q", err, yielded)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upload that yielded its place not answered within 10 s of its next read")
	}
	if err := <-done; err != nil {
		t.Fatalf("an upload of a company holding none, every place held: %v, want it stored in the yielded place", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.spools); n != 3 {
		t.Fatalf("arriving places held once the upload given the yielded one was stored: %d, want 3", n)
	}
}

// With every place held one a company, an upload of a company holding
// none waits until a place has been held half of ChunkTimeout
// (uploadYield), then takes it, though nothing else changed meanwhile: it
// is woken at that time, not refused at ChunkTimeout for want of a wake.
func TestUploadOfACompanyWithNoneWaitsForAPlaceToYield(t *testing.T) {
	t.Parallel()
	s, devs := companiesService(t, Config{Spools: 2, ChunkTimeout: time.Second}, 1, 1, 1)
	held := []*slowUpload{startUpload(t, s, devs[0][0], "wa:a/0"), startUpload(t, s, devs[1][0], "wa:b/0")}
	done := make(chan error, 1)
	go func() { _, _, err := s.Put(context.Background(), devs[2][0], hello("wa:c/0")); done <- err }()
	var yielded *slowUpload
	poll.Until(t, "an upload yields its place", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for sp := range s.spools {
			if sp.yielded.Load() {
				for i, u := range held {
					if devs[i][0].CompanyID == sp.company {
						yielded = u
					}
				}
				return yielded != nil
			}
		}
		return false
	})
	go yielded.body.Write([]byte("more")) // its next read
	select {
	case err := <-yielded.done:
		if pe, ok := problem.As(err); !ok || pe.Code != problem.RateLimited || pe.RetryAfter != busyRetrySeconds {
			t.Fatalf("the upload that yielded its place: %v, want 429 rate_limited with Retry-After", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upload that yielded its place not answered within 10 s of its next read")
	}
	if err := <-done; err != nil {
		t.Fatalf("an upload of a company holding none, each place held by one of another company: %v, want it stored in the yielded place", err)
	}
}

// An upload promised a yielded place whose client goes before the place
// came takes none: the place is free once the upload that yielded it
// ends, not held for the upload that left.
func TestAYieldedPlaceOfAnUploadGoneIsFreed(t *testing.T) {
	t.Parallel()
	s, devs := companiesService(t, Config{Spools: 2, SpoolsKept: -1, ChunkTimeout: 10 * time.Second}, 2, 1)
	held := []*slowUpload{startUpload(t, s, devs[0][0], "wa:a/0"), startUpload(t, s, devs[0][1], "wa:a/1")}
	// startUpload returns as the pipe hands over the first bytes, before
	// the read that took them looks whether its place was yielded: each
	// upload is to wait in its next read when the place is claimed.
	poll.Until(t, "both uploads counted their first bytes", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for sp := range s.spools {
			if sp.received.Load() == 1000 {
				n++
			}
		}
		return n == len(held)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, _, err := s.Put(ctx, devs[1][0], hello("wa:b/0")); done <- err }()
	poll.Until(t, "an upload yields its place", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for sp := range s.spools {
			if sp.yielded.Load() {
				return true
			}
		}
		return false
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiting upload whose client went: %v, want context.Canceled", err)
	}
	for _, u := range held {
		go u.body.Write([]byte("more")) // the next read of each: the one that yielded ends
	}
	poll.Until(t, "the yielded place freed", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.spools) == 1 && s.spooling[devs[1][0].CompanyID] == 0
	})
	if _, _, err := s.Put(context.Background(), devs[1][0], hello("wa:b/1")); err != nil {
		t.Fatalf("the company's upload once the yielded place was freed: %v, want it stored", err)
	}
}
