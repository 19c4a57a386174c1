package boltstore

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"
)

// BenchmarkMediaPutAndCopy stores files of media.DefaultMaxBytes (16 MiB)
// and reads one back: what one upload and one download cost the store.
func BenchmarkMediaPutAndCopy(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := Company{Name: "Acme", APIKeyHash: []byte("h")}
	if err := s.CreateCompany(&c, &User{FirstName: "Ana", Email: "a@example.com", PasswordHash: "set"}); err != nil {
		b.Fatal(err)
	}
	if err := s.ProvisionDevices([]Device{{Fingerprint: "fp", CompanyID: c.ID, Status: DeviceActive, TokenHash: []byte("tok")}}); err != nil {
		b.Fatal(err)
	}
	devs, err := s.CompanyDevices(c.ID)
	if err != nil || len(devs) != 1 {
		b.Fatal(devs, err)
	}
	dev := devs[0]
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	put := func(id string) {
		if _, _, err := s.PutMedia(Media{ID: id, CompanyID: c.ID, DeviceID: dev.ID, Key: id, ContentType: "video/mp4", Size: int64(len(data))}, bytes.NewReader(data), now); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("put", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			put(fmt.Sprintf("med_%d", i))
		}
	})
	put("med_read")
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if n, err := s.CopyMedia(io.Discard, "med_read", 0, -1); err != nil || n != int64(len(data)) {
				b.Fatal(n, err)
			}
		}
	})
}
