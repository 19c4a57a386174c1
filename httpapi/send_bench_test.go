package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/httpapi"
)

// BenchmarkChatSend is POST /chat/send of an SMS as a company's program
// sends it: API key, JSON body, to a paired phone, through the server's
// whole middleware chain and a real store (opened without fsync, so that
// the figure is the CPU and the garbage of the request, not the disk). The
// request goes to the handler in-process: no connection, no client, so
// that allocs/op and B/op are the server's own. The phone is paired but not
// linked: each send is stored and stays queued for it.
//
// Plain sends without an Idempotency-Key; Idempotent each with a key of its
// own (the first answer is kept with it in the send's transaction).
func BenchmarkChatSend(b *testing.B) {
	b.Run("Plain", func(b *testing.B) { benchChatSend(b, false) })
	b.Run("Idempotent", func(b *testing.B) { benchChatSend(b, true) })
	b.Run("Concurrent", benchChatSendConcurrent)
}

// benchChatSendConcurrent sends as Plain does from 64 goroutines at once
// (32 a core on two), so that the store's writer groups the sends into
// commits of many, as it does under load: the figures are then those of a
// send's own work more than of a commit's.
func benchChatSendConcurrent(b *testing.B) {
	e, key := sendBenchEnv(b)
	b.ReportAllocs()
	b.SetParallelism(64 / max(1, runtime.GOMAXPROCS(0)))
	cpu := processCPUTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		s := newBenchSend(key)
		for pb.Next() {
			if status := s.send(e); status != http.StatusOK {
				b.Errorf("send: status %d", status)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPUTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// sendBenchEnv is the benchmarks' server, without a rate limit in reach,
// and the API key of its company, whose phone "a-phone" is paired.
func sendBenchEnv(b *testing.B) (*env, string) {
	e := newEnv(b, func(c *httpapi.Config) {
		roomy(c)
		c.GeneralRate.Limit = 1 << 30
	})
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "a-phone")
	return e, a.apiKey
}

// benchSendBody is the body of every benchmarked send.
var benchSendBody = []byte(`{"device_fingerprint":"a-phone","phone":"+15551234567","message":"Your code is 123456","sim_slot":"SIM1"}`)

// benchSend is one request, its body renewed for each send, and a response
// writer that keeps nothing: the benchmark's own allocations stay out of
// the figures.
type benchSend struct {
	rd  *bytes.Reader
	req *http.Request
	w   *discardWriter
}

func newBenchSend(key string) *benchSend {
	rd := bytes.NewReader(benchSendBody)
	return &benchSend{rd: rd, w: &discardWriter{h: http.Header{}}, req: &http.Request{Method: http.MethodPost,
		URL: &url.URL{Path: "/chat/send"}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Host: "api.test", RemoteAddr: "192.0.2.1:4000", RequestURI: "/chat/send", Body: io.NopCloser(rd),
		ContentLength: int64(len(benchSendBody)), Header: http.Header{
			"Authorization": {"Bearer " + key},
			"Content-Type":  {"application/json"},
		}}}
}

// send sends the request again and answers its status.
func (s *benchSend) send(e *env) int {
	s.rd.Reset(benchSendBody)
	s.req.URL.RawPath = ""
	clear(s.w.h)
	s.w.status = 0
	e.handler.ServeHTTP(s.w, s.req)
	return s.w.status
}

func benchChatSend(b *testing.B, idempotent bool) {
	e, key := sendBenchEnv(b)
	s := newBenchSend(key)
	var keys []string
	if idempotent {
		keys = make([]string, b.N)
		for i := range keys {
			keys[i] = "order-" + strconv.Itoa(i)
		}
	}
	b.ReportAllocs()
	cpu := processCPUTime()
	b.ResetTimer()
	for i := range b.N {
		if idempotent {
			s.req.Header["Idempotency-Key"] = keys[i : i+1]
		}
		if status := s.send(e); status != http.StatusOK {
			b.Fatalf("send %d: status %d", i, status)
		}
	}
	b.StopTimer()
	// The process's CPU time per send, garbage collection included, which
	// the other work of a shared machine moves less than the wall time.
	b.ReportMetric(float64(processCPUTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// discardWriter is an http.ResponseWriter that keeps the status only.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.h }

func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}

// SetWriteDeadline is there as on net/http's own writer, which the server
// sets a deadline on for every answer: without it the server would go
// through http.ResponseController and its error, two allocations a send
// that a served request never makes.
func (w *discardWriter) SetWriteDeadline(time.Time) error { return nil }

func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

// processCPUTime is the CPU time the process has used, user and system.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
