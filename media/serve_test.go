package media

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// A download that stops reading is cut once a chunk waits ChunkTimeout to
// be taken: its handler returns, holding no connection, goroutine or chunk
// for ever.
func TestServeCutsAStalledReader(t *testing.T) {
	t.Parallel()
	// More than the socket buffers of both ends take, so the writes block.
	s, m := servedFile(t, Config{ChunkTimeout: 100 * time.Millisecond}, bytes.Repeat([]byte("x"), DefaultMaxBytes))
	served := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served <- s.Serve(w, r, m) }))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := conn.Write([]byte("GET /media HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err == nil {
			t.Fatal("a reader that took nothing was served the whole file")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the download of a reader that stopped reading was not cut within 30 s")
	}
}

// servedFile stores data as a file of a company's device through a
// service configured as cfg (its key and spool filled in).
func servedFile(t *testing.T, cfg Config, data []byte) (*Service, store.Media) {
	t.Helper()
	s, dev := deviceService(t, cfg)
	m, _, err := s.Put(context.Background(), dev, Upload{Key: "wa:1/0", ContentType: "video/mp4", Length: int64(len(data)), Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

// deviceService is a service configured as cfg (its key and spool filled
// in) on a store with one company and its device.
func deviceService(t *testing.T, cfg Config) (*Service, store.Device) {
	t.Helper()
	s, devs := companiesService(t, cfg, 1)
	return s, devs[0][0]
}

// companiesService is a service configured as cfg (its key and spool
// filled in) on a store with a company for each of devices, which has that
// many devices: devs[c][d] is company c's device d.
func companiesService(t *testing.T, cfg Config, devices ...int) (*Service, [][]store.Device) {
	t.Helper()
	st := storetest.Open(t)
	devs := make([][]store.Device, len(devices))
	for c, n := range devices {
		co := storetest.Company(t, st, fmt.Sprintf("Acme %d", c), fmt.Sprintf("admin@acme%d.test", c))
		for d := range n {
			fp := fmt.Sprintf("pixel-%d-%d", c, d)
			if err := st.ProvisionDevices([]store.Device{{Fingerprint: fp, CompanyID: co.ID, Name: fp, Status: store.DeviceActive,
				SelectedSIM: "BOTH", TokenHash: []byte("token-" + fp), CreatedAt: time.Now()}}); err != nil {
				t.Fatal(err)
			}
			dev, err := st.CompanyDevice(co.ID, fp)
			if err != nil {
				t.Fatal(err)
			}
			devs[c] = append(devs[c], dev)
		}
	}
	cfg.Key, cfg.TempDir = []byte("0123456789abcdef"), t.TempDir()
	s, err := New(cfg, st, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return s, devs
}

// One byte range is answered 206 with that part, from any byte of any
// chunk; what a server may ignore gets the whole file; a range starting
// past the end is refused (416) before anything is written.
func TestServeByteRanges(t *testing.T) {
	t.Parallel()
	data := make([]byte, 2*store.MediaChunkSize+1000)
	for i := range data {
		data[i] = byte(i * 7 % 251)
	}
	s, m := servedFile(t, Config{}, data)
	size := int64(len(data))
	etag := `"` + m.ID + `"`
	for _, c := range []struct {
		name, rng, ifRange string
		status             int
		first, last        int64 // the part answered, both included
	}{
		{"no range", "", "", 200, 0, size - 1},
		{"first byte", "bytes=0-0", "", 206, 0, 0},
		{"across a chunk's end", fmt.Sprintf("bytes=%d-%d", store.MediaChunkSize-3, store.MediaChunkSize+2), "", 206, store.MediaChunkSize - 3, store.MediaChunkSize + 2},
		{"from a byte on", fmt.Sprintf("bytes=%d-", store.MediaChunkSize+5), "", 206, store.MediaChunkSize + 5, size - 1},
		{"the last bytes", "bytes=-10", "", 206, size - 10, size - 1},
		{"a suffix longer than the file", "bytes=-99999999", "", 206, 0, size - 1},
		{"last past the end", fmt.Sprintf("bytes=%d-99999999999999999999", size-4), "", 206, size - 4, size - 1},
		{"unit case and spaces", "Bytes= 10-19", "", 206, 10, 19},
		{"If-Range with the ETag", "bytes=0-9", etag, 206, 0, 9},
		{"If-Range with another", "bytes=0-9", `"other"`, 200, 0, size - 1},
		{"If-Range with a date", "bytes=0-9", "Wed, 21 Oct 2026 07:28:00 GMT", 200, 0, size - 1},
		{"several ranges", "bytes=0-9,20-29", "", 200, 0, size - 1},
		{"another unit", "items=0-9", "", 200, 0, size - 1},
		{"last before first", "bytes=9-0", "", 200, 0, size - 1},
		{"not a number", "bytes=a-9", "", 200, 0, size - 1},
		{"a sign", "bytes=+1-9", "", 200, 0, size - 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/media/"+m.ID, nil)
			if c.rng != "" {
				r.Header.Set("Range", c.rng)
			}
			if c.ifRange != "" {
				r.Header.Set("If-Range", c.ifRange)
			}
			w := httptest.NewRecorder()
			if err := s.Serve(w, r, m); err != nil {
				t.Fatal(err)
			}
			want := data[c.first : c.last+1]
			h := w.Result().Header
			if w.Code != c.status || !bytes.Equal(w.Body.Bytes(), want) || h.Get("Content-Length") != strconv.Itoa(len(want)) ||
				h.Get("Accept-Ranges") != "bytes" || h.Get("ETag") != etag {
				t.Fatalf("%d, %d bytes, headers %v; want %d with bytes %d-%d", w.Code, w.Body.Len(), h, c.status, c.first, c.last)
			}
			wantRange := ""
			if c.status == 206 {
				wantRange = fmt.Sprintf("bytes %d-%d/%d", c.first, c.last, size)
			}
			if got := h.Get("Content-Range"); got != wantRange {
				t.Fatalf("Content-Range %q, want %q", got, wantRange)
			}
		})
	}
	for _, rng := range []string{fmt.Sprintf("bytes=%d-", size), fmt.Sprintf("bytes=%d-%d", size+5, size+9), "bytes=-0", "bytes=99999999999999999999-"} {
		r := httptest.NewRequest(http.MethodGet, "/media/"+m.ID, nil)
		r.Header.Set("Range", rng)
		w := httptest.NewRecorder()
		err := s.Serve(w, r, m)
		pe, ok := err.(*problem.Error)
		if !ok || pe.Code != problem.RangeNotSatisfiable || pe.Status() != http.StatusRequestedRangeNotSatisfiable || pe.Field != "Range" || w.Body.Len() != 0 ||
			w.Header().Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
			t.Fatalf("%s: %v, %d bytes written, Content-Range %q; want a 416 refusal before anything is written", rng, err, w.Body.Len(), w.Header().Get("Content-Range"))
		}
	}
	// HEAD of a range: its headers alone.
	r := httptest.NewRequest(http.MethodHead, "/media/"+m.ID, nil)
	r.Header.Set("Range", "bytes=5-9")
	w := httptest.NewRecorder()
	if err := s.Serve(w, r, m); err != nil || w.Code != 206 || w.Body.Len() != 0 || w.Header().Get("Content-Length") != "5" {
		t.Fatalf("HEAD of a range: %d, %d bytes, %v (%v)", w.Code, w.Body.Len(), w.Header(), err)
	}
}

// A GET or HEAD whose If-None-Match names the file's ETag (weakly, in a
// list, or *) is answered 304 with the ETag and no body, before any Range:
// a browser revalidating a file it keeps (Cache-Control: max-age=300) is
// not sent the whole file again, as RFC 9110 section 13.1.2 requires of a
// server that gives ETags. Any other tag gets the file.
func TestServeIfNoneMatch(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("0123456789"), 100)
	s, m := servedFile(t, Config{}, data)
	etag := `"` + m.ID + `"`
	for _, c := range []struct {
		name, method, inm, rng string
		status                 int
	}{
		{"the ETag", http.MethodGet, etag, "", 304},
		{"the ETag, weak", http.MethodGet, "W/" + etag, "", 304},
		{"in a list", http.MethodGet, `"other", ` + etag, "", 304},
		{"any", http.MethodGet, "*", "", 304},
		{"with a range", http.MethodGet, etag, "bytes=0-9", 304},
		{"HEAD", http.MethodHead, etag, "", 304},
		{"another tag", http.MethodGet, `"other"`, "", 200},
		{"unquoted", http.MethodGet, m.ID, "", 200},
		{"another tag, a range", http.MethodGet, `"other"`, "bytes=0-9", 206},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, "/media/"+m.ID, nil)
			r.Header.Set("If-None-Match", c.inm)
			if c.rng != "" {
				r.Header.Set("Range", c.rng)
			}
			w := httptest.NewRecorder()
			if err := s.Serve(w, r, m); err != nil {
				t.Fatal(err)
			}
			h := w.Result().Header
			if w.Code != c.status || h.Get("ETag") != etag {
				t.Fatalf("%d, ETag %q; want %d with the ETag", w.Code, h.Get("ETag"), c.status)
			}
			if c.status == 304 && (w.Body.Len() != 0 || h.Get("Content-Range") != "" || h.Get("Cache-Control") == "") {
				t.Fatalf("304 with %d bytes, headers %v; want no body and no Content-Range, with Cache-Control", w.Body.Len(), h)
			}
			if c.status == 200 && !bytes.Equal(w.Body.Bytes(), data) && c.method == http.MethodGet {
				t.Fatalf("%d bytes; want the whole file", w.Body.Len())
			}
		})
	}
}

// heldWriter is a response whose reader takes nothing until released.
type heldWriter struct {
	*httptest.ResponseRecorder
	writing chan struct{} // closed at the first write
	release chan struct{}
	once    bool
}

func (w *heldWriter) Write(p []byte) (int, error) {
	if !w.once {
		w.once = true
		close(w.writing)
	}
	<-w.release
	return w.ResponseRecorder.Write(p)
}

// A company's files are downloaded at most DownloadsPerCompany at once,
// each holding a chunk while its reader takes it: another GET is 429 with
// Retry-After before anything is written; a HEAD, which holds nothing, is
// answered; the place is free again once a download ends.
func TestServeBoundsACompanysDownloads(t *testing.T) {
	t.Parallel()
	s, m := servedFile(t, Config{DownloadsPerCompany: 1}, []byte("the bytes of the file"))
	get := func(method string) (*httptest.ResponseRecorder, error) {
		w := httptest.NewRecorder()
		return w, s.Serve(w, httptest.NewRequest(method, "/media/"+m.ID, nil), m)
	}
	slow := &heldWriter{ResponseRecorder: httptest.NewRecorder(), writing: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- s.Serve(slow, httptest.NewRequest(http.MethodGet, "/media/"+m.ID, nil), m) }()
	<-slow.writing
	w, err := get(http.MethodGet)
	pe, ok := err.(*problem.Error)
	const busy = "The company's files have 1 download under way, the most at once; retry in 5 seconds."
	if !ok || pe.Code != problem.RateLimited || pe.RetryAfter != busyRetrySeconds || pe.Message != busy || w.Body.Len() != 0 {
		t.Fatalf("a second download while one is under way: %v, %d bytes written; want 429 rate_limited with Retry-After, %q, nothing written", err, w.Body.Len(), busy)
	}
	// A refused range carries none of the file's headers: a 429 with
	// Content-Range would say it holds the part.
	ranged := httptest.NewRecorder()
	rq := httptest.NewRequest(http.MethodGet, "/media/"+m.ID, nil)
	rq.Header.Set("Range", "bytes=4-8")
	err = s.Serve(ranged, rq, m)
	if pe, ok := err.(*problem.Error); !ok || pe.Code != problem.RateLimited {
		t.Fatalf("a second ranged download while one is under way: %v, want 429 rate_limited", err)
	}
	for _, name := range []string{"Content-Range", "Content-Length", "ETag", "Accept-Ranges", "Content-Type"} {
		if v := ranged.Header().Get(name); v != "" {
			t.Fatalf("the refused ranged download carries %s: %q", name, v)
		}
	}
	if w, err := get(http.MethodHead); err != nil || w.Code != http.StatusOK {
		t.Fatalf("HEAD while a download is under way: %d (%v), want 200", w.Code, err)
	}
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w, err := get(http.MethodGet); err != nil || w.Body.String() != "the bytes of the file" {
		t.Fatalf("a download once the other ended: %q (%v)", w.Body.String(), err)
	}
}
