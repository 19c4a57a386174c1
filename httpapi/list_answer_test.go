package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// largestWrite is a ResponseWriter that keeps the largest piece of the
// answer written to it at once.
type largestWrite struct {
	http.ResponseWriter
	most *atomic.Int64
}

func (w largestWrite) Write(p []byte) (int, error) {
	for {
		m := w.most.Load()
		if int64(len(p)) <= m || w.most.CompareAndSwap(m, int64(len(p))) {
			break
		}
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets the server set the answer's write deadline through it.
func (w largestWrite) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestListAnswersAreWrittenAsTheyAreEncoded: the list routes whose items
// carry message texts write their answers an item at a time, never the
// whole answer at once. c.JSON marshalled the whole answer into one
// buffer (grown by doubling) and wrote it in one piece: a page of 100
// messages of 10,000 '<' (1 MB of text, each '<' written \u003c) was a
// 6 MB buffer on top of the texts, as many as a company asked at once.
func TestListAnswersAreWrittenAsTheyAreEncoded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	e.pairPhone(a.apiKey, "acme-phone")
	d, err := e.store.CompanyDevice(uint64(a.id), "acme-phone")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("<", 10000)
	for i := range 100 {
		for _, phone := range []string{"+15550000001", fmt.Sprintf("+1555100%04d", i)} {
			m := longInbound(d.CompanyID, d.ID, phone, text, fmt.Sprintf("%s-%d", phone, i))
			if _, _, err := e.store.StoreInbound(&m, e.clock.Now); err != nil {
				t.Fatal(err)
			}
		}
	}
	var most atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.handler.ServeHTTP(largestWrite{ResponseWriter: w, most: &most}, r)
	}))
	defer srv.Close()
	for _, c := range []struct {
		path  string
		items string
		n     int
	}{
		{"/chat/messages?device_fingerprint=acme-phone&phone=%2B15550000001&limit=100", "messages", 100},
		{"/chat/conversations?device_fingerprint=acme-phone", "conversations", 101},
		{"/automation/inbound-sms", "", 50},
	} {
		most.Store(0)
		req, _ := http.NewRequest("GET", srv.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+a.apiKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %d %s", c.path, res.StatusCode, res.Header.Get("Content-Type"))
		}
		var items []map[string]any
		if c.items == "" {
			err = json.Unmarshal(raw, &items)
		} else {
			var body map[string]json.RawMessage
			if err = json.Unmarshal(raw, &body); err == nil {
				err = json.Unmarshal(body[c.items], &items)
			}
		}
		if err != nil || len(items) != c.n {
			t.Fatalf("GET %s: %d %s, want %d: %v", c.path, len(items), c.items, c.n, err)
		}
		for _, it := range items {
			if it["message"] != text && it["lastMessage"] != text {
				t.Fatalf("GET %s: an item without its text: %v", c.path, it)
			}
		}
		if m := most.Load(); len(raw) < 2<<20 || m > 128<<10 {
			t.Errorf("GET %s: %d bytes answered, %d of them written at once; want at most 128 KiB at once", c.path, len(raw), m)
		}
	}
}
