package media

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// An upload is read under its own deadline, not the server's one for the
// whole request: a slow link whose bytes keep coming (each 256 KiB within
// ChunkTimeout) is stored whole, though it takes longer than the server's
// ReadTimeout; one that stalls is cut with 408 request_timeout, which an
// agent answers by uploading again (a 400 would make it forward the
// message without the file).
func TestUploadReadDeadlineFollowsTheChunks(t *testing.T) {
	t.Parallel()
	const chunk = store.MediaChunkSize
	s, dev := deviceService(t, Config{ChunkTimeout: 2 * time.Second})
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
	// each chunk well within ChunkTimeout.
	if status, body := upload("slow", 4*chunk, []int{chunk, chunk, chunk, chunk}, 400*time.Millisecond); status != http.StatusOK || body != fmt.Sprint(4*chunk) {
		t.Fatalf("a slow upload whose bytes keep coming: %d %q, want 200 and all %d bytes stored", status, body, 4*chunk)
	}
	// Half a chunk of two, then nothing: the server cuts it ChunkTimeout on.
	if status, body := upload("stalled", 2*chunk, []int{chunk / 2}, 0); status != http.StatusRequestTimeout || !strings.Contains(body, "request_timeout") {
		t.Fatalf("a stalled upload: %d %q, want 408 request_timeout", status, body)
	}
}
