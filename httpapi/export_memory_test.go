package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// TestExportOfLongTextsIsWhole: the store reads an export's conversations
// and messages a megabyte of text at a time (store.ExportPageText), so a
// device whose conversations each end with 10,000 four-byte characters
// takes several pages of 26 or 27; the document still has every one of
// them, and every message, once.
func TestExportOfLongTextsIsWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	const n = 60
	storeLongInbound(t, e, a, n)
	r := e.do(call{method: "GET", path: "/company/export", token: a.apiKey})
	e.want(r, http.StatusOK, "")
	var doc struct {
		Conversations []struct {
			Phone string `json:"phone"`
		} `json:"conversations"`
		Messages []struct {
			Text string `json:"text"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(r.Raw, &doc); err != nil {
		t.Fatal(err)
	}
	phones := map[string]bool{}
	for _, c := range doc.Conversations {
		phones[c.Phone] = true
	}
	if len(doc.Conversations) != n || len(phones) != n {
		t.Fatalf("%d conversations (%d numbers) in the export, want %d", len(doc.Conversations), len(phones), n)
	}
	if len(doc.Messages) != n {
		t.Fatalf("%d messages in the export, want %d", len(doc.Messages), n)
	}
}

// storeLongInbound stores n inbound messages of 10,000 four-byte characters
// on the company's phone acme-phone, each from a number of its own.
func storeLongInbound(t *testing.T, e *env, a company, n int) {
	t.Helper()
	d, err := e.store.CompanyDevice(uint64(a.id), "acme-phone")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("\U0001F600", 10000)
	for i := range n {
		m := longInbound(d.CompanyID, d.ID, fmt.Sprintf("+1555%07d", i), text, fmt.Sprintf("c%d", i))
		if _, _, err := e.store.StoreInbound(&m, e.clock.Now); err != nil {
			t.Fatal(err)
		}
	}
}

// longInbound is an inbound SMS of the device's.
func longInbound(companyID, deviceID uint64, phone, text, clientID string) store.Message {
	return store.Message{UUID: "in-" + clientID, CompanyID: companyID, DeviceID: deviceID, Channel: "sms",
		Phone: phone, Text: text, SIMSlot: "SIM1", Segments: 1, ClientID: clientID}
}

// TestMeasureExportMemory prints what a company export of long texts costs
// the server: the answer's size and the heap's peak over the idle heap, one
// export and 2 at once (a company's most). Run it by hand:
//
//	SIMRELAY_MEASURE=1 go test ./httpapi -run TestMeasureExportMemory -v
func TestMeasureExportMemory(t *testing.T) {
	if os.Getenv("SIMRELAY_MEASURE") == "" {
		t.Skip("a measurement: SIMRELAY_MEASURE=1 runs it")
	}
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	start := time.Now()
	storeLongInbound(t, e, a, 1000)
	t.Logf("stored in %v", time.Since(start))
	for _, n := range []int{1, 2} {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		idle := ms.HeapInuse
		var peak uint64
		stop := make(chan struct{})
		sampled := make(chan struct{})
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
				req, _ := http.NewRequest("GET", e.url+"/company/export", nil)
				req.Header.Set("Authorization", "Bearer "+a.apiKey)
				r, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer r.Body.Close()
				sizes[i], _ = io.Copy(io.Discard, r.Body)
			}()
		}
		wg.Wait()
		close(stop)
		<-sampled
		t.Logf("%d export(s) at once: %d bytes each, heap peak %.1f MB over idle (%v)", n, sizes[0], float64(peak-idle)/1e6, time.Since(start))
	}
}
