package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
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
	storeLongInbound(t, e, a, "acme-phone", n)
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
// on the company's phone fingerprint, each from a number of its own.
func storeLongInbound(t *testing.T, e *env, a company, fingerprint string, n int) {
	t.Helper()
	d, err := e.store.CompanyDevice(uint64(a.id), fingerprint)
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
// export, 2 at once (a company's most) and 16 at once of 8 companies (the
// server's most). Run it by hand:
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
	storeLongInbound(t, e, a, "acme-phone", 1000)
	t.Logf("stored in %v", time.Since(start))
	keys := []string{a.apiKey}
	for i := range 7 {
		c := e.newCompany(fmt.Sprintf("Other %d", i), fmt.Sprintf("owner@other%d.test", i))
		fp := fmt.Sprintf("other-phone-%d", i)
		e.pairPhone(c.apiKey, fp)
		storeLongInbound(t, e, c, fp, 1000)
		keys = append(keys, c.apiKey)
	}
	for _, n := range []int{1, 2, 16} {
		size, peak := measurePeak(t, n, func(i int) (int64, error) {
			req, _ := http.NewRequest("GET", e.url+"/company/export", nil)
			req.Header.Set("Authorization", "Bearer "+keys[i/2])
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, err
			}
			defer r.Body.Close()
			if r.StatusCode != http.StatusOK {
				return 0, fmt.Errorf("export %d: %d", i, r.StatusCode)
			}
			return io.Copy(io.Discard, r.Body)
		})
		t.Logf("%d export(s) at once: %d bytes each, heap peak %.1f MB over idle (%v)", n, size, float64(peak)/1e6, time.Since(start))
	}
}
