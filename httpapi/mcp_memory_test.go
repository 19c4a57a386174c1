package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMeasureReadMemory prints what the routes and MCP tools that answer
// message texts cost the server when every text is 10,000 four-byte
// characters: the answer's size and the heap's peak over the idle heap,
// one request, 4, 32 and 100 at once (the default rate limit's minute) of
// one company (MCP requests beyond the company's MCPPerCompany, list reads
// beyond its ReadsPerCompany, wait for a place). Run it by hand:
//
//	SIMRELAY_MEASURE=1 go test ./httpapi -run TestMeasureReadMemory -v
//
// SIMRELAY_MEASURE_ONLY="GET /chat/conversations" measures only the cases
// whose names hold it, and SIMRELAY_MEASURE_AT_ONCE=32 only that many at
// once, so that the process's peak resident set (VmHWM), which only rises,
// is that case's.
func TestMeasureReadMemory(t *testing.T) {
	if os.Getenv("SIMRELAY_MEASURE") == "" {
		t.Skip("a measurement: SIMRELAY_MEASURE=1 runs it")
	}
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	storeLongInbound(t, e, a, "acme-phone", 1000)
	// 100 more from one number: a whole page of its history.
	d, _ := e.store.CompanyDevice(uint64(a.id), "acme-phone")
	storeLongFrom(t, e, d.CompanyID, d.ID, "+15550000001", 100)
	tool := func(name, args string) *http.Request {
		req, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`","arguments":`+args+`}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		return req
	}
	get := func(path string) *http.Request {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		return req
	}
	for _, c := range []struct {
		name string
		req  func() *http.Request
	}{
		{"GET /chat/conversations?limit=1000", func() *http.Request {
			return get("/chat/conversations?device_fingerprint=acme-phone&limit=1000")
		}},
		{"MCP list_conversations limit 1000", func() *http.Request {
			return tool("list_conversations", `{"device_fingerprint":"acme-phone","limit":1000}`)
		}},
		{"GET /chat/messages?limit=100", func() *http.Request {
			return get("/chat/messages?device_fingerprint=acme-phone&phone=%2B15550000001&limit=100")
		}},
		{"MCP read_conversation limit 100", func() *http.Request {
			return tool("read_conversation", `{"device_fingerprint":"acme-phone","phone":"+15550000001","limit":100}`)
		}},
		{"GET /automation/inbound-sms", func() *http.Request { return get("/automation/inbound-sms") }},
		{"MCP latest_inbound", func() *http.Request { return tool("latest_inbound", `{}`) }},
		// The reads whose answers carry no message texts, for comparison.
		{"GET /analytics", func() *http.Request { return get("/analytics") }},
		{"GET /dashboard/summary", func() *http.Request { return get("/dashboard/summary") }},
		{"GET /device/list", func() *http.Request { return get("/device/list") }},
	} {
		if !strings.Contains(c.name, os.Getenv("SIMRELAY_MEASURE_ONLY")) {
			continue
		}
		for _, n := range []int{1, 4, 32, 100} {
			if v := os.Getenv("SIMRELAY_MEASURE_AT_ONCE"); v != "" && v != fmt.Sprint(n) {
				continue
			}
			size, peak := measurePeak(t, n, func(int) (int64, error) {
				req := c.req()
				req.Header.Set("Authorization", "Bearer "+a.apiKey)
				r, err := http.DefaultClient.Do(req)
				if err != nil {
					return 0, err
				}
				defer r.Body.Close()
				if r.StatusCode != http.StatusOK {
					b, _ := io.ReadAll(r.Body)
					return 0, fmt.Errorf("%d %s", r.StatusCode, b)
				}
				return io.Copy(io.Discard, r.Body)
			})
			t.Logf("%s, %d at once: %d bytes each, heap peak %.1f MB over idle", c.name, n, size, float64(peak)/1e6)
		}
	}
}

// storeLongFrom stores n inbound messages of 10,000 four-byte characters
// from one number.
func storeLongFrom(t *testing.T, e *env, companyID, deviceID uint64, phone string, n int) {
	t.Helper()
	text := strings.Repeat("\U0001F600", 10000)
	for i := range n {
		m := longInbound(companyID, deviceID, phone, text, fmt.Sprintf("from-%s-%d", phone, i))
		if _, _, err := e.store.StoreInbound(&m, e.clock.Now); err != nil {
			t.Fatal(err)
		}
	}
}

// vmHWM is the process's peak resident set (VmHWM of /proc/self/status),
// in bytes; 0 where it cannot be read.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

// measurePeak runs do n times at once (its argument: which) and answers the
// first's size and the heap's peak over the idle heap meanwhile. It logs
// how far the process's peak resident set rose (VmHWM: it only rises, so a
// case after a larger one shows none; on bbolt it counts the pages of the
// store's file the reads mapped in, 80 MB per company here, which the
// kernel may drop, so the heap is the measure of what a request holds).
func measurePeak(t *testing.T, n int, do func(i int) (int64, error)) (int64, uint64) {
	hwm := vmHWM()
	defer func() { t.Logf("  VmHWM %d MB, +%.1f MB", vmHWM()>>20, float64(vmHWM()-hwm)/1e6) }()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	idle := ms.HeapInuse
	var peak uint64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	sizes := make([]int64, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if sizes[i], err = do(i); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	if peak < idle {
		return sizes[0], 0
	}
	return sizes[0], peak - idle
}
