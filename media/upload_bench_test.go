package media

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// BenchmarkUploadOverHTTP stores a 16 MiB file over loopback HTTP, as the
// upload route does (its own read deadline per 256 KiB), one at a time.
func BenchmarkUploadOverHTTP(b *testing.B) {
	st := storetest.Open(b)
	co := storetest.Company(b, st, "Acme", "admin@acme.test")
	if err := st.ProvisionDevices([]store.Device{{Fingerprint: "pixel", CompanyID: co.ID, Name: "pixel", Status: store.DeviceActive,
		SelectedSIM: "BOTH", TokenHash: []byte("token-pixel"), CreatedAt: time.Now()}}); err != nil {
		b.Fatal(err)
	}
	dev, err := st.CompanyDevice(co.ID, "pixel")
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{Key: []byte("0123456789abcdef"), TempDir: b.TempDir()}, st, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, err := s.Put(r.Context(), dev, Upload{Key: r.URL.Query().Get("key"), ContentType: "video/mp4", Length: r.ContentLength,
			Body: r.Body, ReadDeadline: http.NewResponseController(w).SetReadDeadline})
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	for _, size := range []int{64 << 10, DefaultMaxBytes} {
		b.Run(fmt.Sprint(size>>10, "KiB"), func(b *testing.B) { upload(b, srv.URL, size) })
	}
}

func upload(b *testing.B, url string, size int) {
	file := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	b.SetBytes(int64(len(file)))
	b.ResetTimer()
	for i := range b.N {
		res, err := http.Post(fmt.Sprintf("%s/?key=f%d-%d", url, size, i), "video/mp4", bytes.NewReader(file))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
}
