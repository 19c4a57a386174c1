package media

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// An upload is read under its own deadline, not the server's one for the
// whole request: a slow link whose bytes keep coming (each 256 KiB within
// UploadChunkTimeout) is stored whole, though it takes longer than the server's
// ReadTimeout; one that stalls is cut with 408 request_timeout, which an
// agent answers by uploading again (a 400 would make it forward the
// message without the file).
func TestUploadReadDeadlineFollowsTheChunks(t *testing.T) {
	t.Parallel()
	const chunk = store.MediaChunkSize
	s, dev := deviceService(t, Config{UploadChunkTimeout: 2 * time.Second})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, _, err := s.Put(r.Context(), dev, Upload{Key: r.URL.Query().Get("key"), ContentType: "video/mp4", Length: r.ContentLength,
			Body: r.Body, ReadDeadline: http.NewResponseController(w).SetReadDeadline})
		if pe, ok := problem.As(err); ok {
			w.WriteHeader(pe.Status())
			fmt.Fprint(w, pe.Code)
			return
		}
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%d", m.Size)
	}))
	srv.Config.ReadTimeout = 600 * time.Millisecond // as serve's minute, for the whole request
	srv.Start()
	defer srv.Close()

	// upload writes the request by hand: a head, then parts with pauses.
	upload := func(key string, total int, parts []int, pause time.Duration) (int, string) {
		t.Helper()
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /?key=%s HTTP/1.1\r\nHost: x\r\nContent-Type: video/mp4\r\nContent-Length: %d\r\n\r\n", key, total)
		for i, n := range parts {
			if i > 0 {
				time.Sleep(pause) // the slow link itself, not a wait for the server
			}
			if _, err := conn.Write(bytes.Repeat([]byte{byte('a' + i)}, n)); err != nil {
				break // the server cut it
			}
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", key, err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}

	// Four chunks, 400 ms apart: 1.2 s in all, past the 600 ms ReadTimeout,
	// each chunk well within UploadChunkTimeout.
	if status, body := upload("slow", 4*chunk, []int{chunk, chunk, chunk, chunk}, 400*time.Millisecond); status != http.StatusOK || body != fmt.Sprint(4*chunk) {
		t.Fatalf("a slow upload whose bytes keep coming: %d %q, want 200 and all %d bytes stored", status, body, 4*chunk)
	}
	// Half a chunk of two, then nothing: the server cuts it UploadChunkTimeout
	// on.
	if status, body := upload("stalled", 2*chunk, []int{chunk / 2}, 0); status != http.StatusRequestTimeout || !strings.Contains(body, "request_timeout") {
		t.Fatalf("a stalled upload: %d %q, want 408 request_timeout", status, body)
	}
}

// An upload that finds every arriving place taken waits at most
// ChunkTimeout for one, then answers 429 rate_limited with Retry-After and
// gives its company's place back. While its body is unread, net/http never
// tells the server that the client has gone (the request's context stays
// live), so a wait without a bound held the company's place for as long as
// the others arrived, and every later upload of the company was refused
// for that abandoned one.
func TestUploadWaitsForAnArrivingPlaceBoundedly(t *testing.T) {
	t.Parallel()
	s, _ := deviceService(t, Config{Spools: 1, ChunkTimeout: 300 * time.Millisecond})
	// The one arriving place, held by a body that never comes (no read
	// deadline: only the place matters here).
	held, holder := io.Pipe()
	defer holder.Close()
	first := make(chan error, 1)
	go func() {
		_, _, err := s.Put(context.Background(), store.Device{ID: 1, CompanyID: 1}, Upload{Key: "wa:1/0", Length: -1, Body: held})
		first <- err
	}()
	poll.Until(t, "the first upload takes the arriving place", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.spools) == 1
	})

	// Another device's upload, its client gone (a context never done). (An
	// upload of another company would take the place of the first, which
	// has held it long enough, a company with none taking the place of one
	// with one.)
	other := store.Device{ID: 2, CompanyID: 1}
	second := make(chan error, 1)
	go func() {
		_, _, err := s.Put(context.Background(), other, Upload{Key: "wa:2/0", Length: 5, Body: strings.NewReader("hello")})
		second <- err
	}()
	select {
	case err := <-second:
		pe, ok := problem.As(err)
		const busy = "The server has 1 upload arriving, the most at once; retry in 5 seconds."
		if !ok || pe.Code != problem.RateLimited || pe.RetryAfter != busyRetrySeconds || pe.Message != busy {
			t.Fatalf("an upload that found no arriving place: %v, want 429 rate_limited with Retry-After, %q", err, busy)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an upload that found no arriving place still waits after 10 s (ChunkTimeout 300 ms)")
	}
	// Its device's and company's places are free again: the next try waits
	// for an arriving place in turn, not refused for the one given up.
	s.mu.Lock()
	device, company := s.sending[other.ID], s.active[other.CompanyID]
	s.mu.Unlock()
	if device != 0 || company != 1 {
		t.Fatalf("uploads under way after the refusal: device %d's %d, company %d's %d, want 0 and 1 (the first's)", other.ID, device, other.CompanyID, company)
	}

	holder.CloseWithError(errors.New("connection reset by peer"))
	if err := <-first; !problem.Is(err, problem.ValidationFailed) {
		t.Fatalf("the first upload, its body broken off: %v, want validation_failed", err)
	}
}
