package media

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// A download that stops reading is cut once a chunk waits ChunkTimeout to
// be taken: its handler returns, holding no connection, goroutine or chunk
// for ever.
func TestServeCutsAStalledReader(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "admin@acme.test")
	if err := st.ProvisionDevices([]store.Device{{Fingerprint: "pixel-1", CompanyID: c.ID, Name: "pixel-1", Status: store.DeviceActive,
		SelectedSIM: "BOTH", TokenHash: []byte("token"), CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	dev, err := st.CompanyDevice(c.ID, "pixel-1")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Key: []byte("0123456789abcdef"), TempDir: t.TempDir(), ChunkTimeout: 100 * time.Millisecond}, st, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	// More than the socket buffers of both ends take, so the writes block.
	file := bytes.Repeat([]byte("x"), DefaultMaxBytes)
	m, _, err := s.Put(context.Background(), dev, Upload{Key: "wa:1/0", ContentType: "video/mp4", Length: int64(len(file)), Body: bytes.NewReader(file)})
	if err != nil {
		t.Fatal(err)
	}
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
