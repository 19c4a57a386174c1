package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
)

// testAdminToken is the operator token the binary tests start servers with.
const testAdminToken = "test-operator-token-0123456789abcdefghij"

// prefill adds a device and about mb megabytes of history to company 1 of
// the store in dir, with the server stopped, so a backup outgrows the socket buffers.
func prefill(t *testing.T, dir, device string, mb int) {
	t.Helper()
	st, err := boltstore.Open(dir, boltstore.Options{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	hash := make([]byte, 32)
	_, _ = rand.Read(hash)
	now := time.Now().UTC()
	if err := st.ProvisionDevices([]store.Device{{Fingerprint: device, CompanyID: 1, UserID: 1, Name: device, Status: store.DeviceActive,
		SelectedSIM: "BOTH", SIMs: []store.SIM{{Slot: "SIM1"}}, TokenHash: hash, CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("x", 1000)
	for batch := range mb {
		msgs := make([]store.Message, 0, 1000)
		for i := range 1000 {
			msgs = append(msgs, store.Message{UUID: fmt.Sprintf("pre-%d-%d", batch, i), CompanyID: 1, Device: device, Direction: store.Outbound,
				Channel: "sms", Phone: fmt.Sprintf("+1555%07d", i), Text: text, SIMSlot: "SIM1", Status: store.MsgDelivered, Segments: 7, CreatedAt: now, UpdatedAt: now})
		}
		if err := st.ImportMessages(msgs); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStalledBackupHoldsNothing starts a backup download with a client that
// reads a few bytes and then stops reading, and wants sends (which grow the
// store file) and /readyz to keep answering while it is stalled. A backup that
// streamed from inside a read transaction blocked bbolt's remap, so every
// write, and then every read, waited for that client.
func TestStalledBackupHoldsNothing(t *testing.T) {
	storetest.EmbeddedOnly(t, "GET /admin/backup streams the store file (on PostgreSQL it answers 409 backup_external, TestQuickStart)")
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	prefill(t, st.dir, "stall-phone", 16)
	srv := startServer(t, bin, st, "--admin-token", testAdminToken, "--rate-general", "1000000/1m")
	u, _ := url.Parse(srv.url)

	// The stalled client: a small receive buffer, read the head, then stop.
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /admin/backup HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", u.Host, testAdminToken)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	head := make([]byte, 1024)
	if _, err := io.ReadFull(conn, head); err != nil {
		t.Fatalf("backup download: %v", err)
	}
	if !bytes.HasPrefix(head, []byte("HTTP/1.1 200")) {
		t.Fatalf("backup download: got %q, want 200", head[:40])
	}

	// While it is stalled: many sends (each commit needs new pages, so the
	// file must grow), then a login and /readyz.
	hc := &http.Client{Transport: testhttp.Transport, Timeout: 5 * time.Minute}
	var done, failed atomic.Int64
	var firstErr sync.Once
	var errText atomic.Value
	fail := func(err error) { failed.Add(1); firstErr.Do(func() { errText.Store(err.Error()) }) }
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 750 {
					body, _ := json.Marshal(map[string]string{"device_fingerprint": "stall-phone", "phone": "+15551234567", "message": fmt.Sprintf("w%d-%d %s", w, i, strings.Repeat("y", 600))})
					req, _ := http.NewRequest("POST", srv.url+"/chat/send", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+apiKey)
					req.Header.Set("Content-Type", "application/json")
					res, err := hc.Do(req)
					if err != nil {
						fail(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						fail(fmt.Errorf("send: %s", res.Status))
						return
					}
					done.Add(1)
				}
			})
		}
		wg.Wait()
		res, err := hc.Post(srv.url+"/auth/login", "application/json", strings.NewReader(`{"email":"you@example.com","password":"Change-me-123"}`))
		if err != nil || res.StatusCode != http.StatusOK {
			fail(fmt.Errorf("login: %v %v", res, err))
		} else {
			res.Body.Close()
		}
		res, err = hc.Get(srv.url + "/readyz")
		if err != nil || res.StatusCode != http.StatusOK {
			fail(fmt.Errorf("readyz: %v %v", res, err))
		} else {
			res.Body.Close()
		}
	}()
	// The stalled download lasts as long as this test holds it; the writes must not wait for it.
	select {
	case <-finished:
	case <-time.After(90 * time.Second):
		t.Fatalf("while a backup download stalled, only %d of 3000 sends were answered within 90s: the store is held by the download", done.Load())
	}
	if failed.Load() > 0 {
		t.Fatalf("requests failed while a backup stalled: %v", errText.Load())
	}

	// The stalled client goes away: its temporary copy is gone, nothing is left in the data directory.
	conn.Close()
	poll.Until(t, "only the store file and the server's lock left in the data directory", func() bool {
		entries, _ := os.ReadDir(st.dir)
		for _, e := range entries {
			if e.Name() != boltstore.FileName && e.Name() != "node.lock" {
				return false
			}
		}
		return len(entries) == 2
	})
	poll.Until(t, "the stalled download ends on the server", func() bool {
		return strings.Contains(srv.stderr.String(), "backup download cut")
	})
	// And a whole backup still works afterwards.
	if code, body := get(t, srv.url+"/admin/backup", testAdminToken); code != 200 || len(body) < 16<<20 {
		t.Fatalf("second backup: got %d and %d bytes %q", code, len(body), body[:min(len(body), 200)])
	}
}
