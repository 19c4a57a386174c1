package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestMediaStoredAttachedAndPruned: a file bigger than one chunk reads
// back whole; a message takes only its own device's unused uploads; an
// upload no message took is pruned after its age, a taken one never; a
// file over the day's storage budget is refused and stores nothing.
func TestMediaStoredAttachedAndPruned(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{CompanyDailyStorage: 4 * MediaChunkSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := webhookFixture(t, s, "a@example.com", 0)
	if err := s.ProvisionDevices([]Device{{Fingerprint: "fp-other", CompanyID: c.ID, Status: DeviceActive, TokenHash: []byte("tok-other")}}); err != nil {
		t.Fatal(err)
	}
	dev := deviceOf(t, s, c.ID, "fp-a@example.com")
	other := deviceOf(t, s, c.ID, "fp-other")
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if _, err := s.AnnounceNumbers(c.ID, dev.ID, ChannelNameWhatsApp, []string{"+15550001111"}, now, 0); err != nil {
		t.Fatal(err)
	}
	put := func(d Device, id, key string, data []byte) (Media, bool, error) {
		return s.PutMedia(Media{ID: id, CompanyID: c.ID, DeviceID: d.ID, Key: key, ContentType: "image/png", Size: int64(len(data))}, bytes.NewReader(data), now)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), MediaChunkSize/16*2+100) // two chunks and a bit
	m, dup, err := put(dev, "med_big", "c1/0", big)
	if err != nil || dup || m.SHA256 == "" {
		t.Fatalf("put: %+v %v %v", m, dup, err)
	}
	if again, dup, err := put(dev, "med_other_id", "c1/0", []byte("x")); err != nil || !dup || again.ID != "med_big" {
		t.Fatalf("a repeated key: got %+v %v %v, want the first upload", again, dup, err)
	}
	if _, _, err := put(dev, "med_orphan", "c2/0", []byte("never named")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := put(other, "med_others", "c3/0", []byte("another device's")); err != nil {
		t.Fatal(err)
	}
	// Over the budget: refused, nothing stored.
	if _, _, err := put(dev, "med_huge", "c4/0", bytes.Repeat([]byte{1}, 2*MediaChunkSize)); !errors.Is(err, ErrStorageBudget) {
		t.Fatalf("over the budget: got %v, want ErrStorageBudget", err)
	}
	if _, err := s.MediaByKey(c.ID, dev.ID, "c4/0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused upload was stored: %v", err)
	}

	in := func(clientID string, ids ...string) (Message, error) {
		msg := Message{UUID: "u-" + clientID, CompanyID: c.ID, DeviceID: dev.ID, Channel: ChannelNameWhatsApp,
			Phone: "+15557654321", Account: "+15550001111", ClientID: clientID}
		for _, id := range ids {
			msg.Media = append(msg.Media, MediaRef{ID: id})
		}
		out, _, err := s.StoreAgentInbound(&msg, func() time.Time { return now })
		return out, err
	}
	if _, err := in("m-x", "med_others"); !errors.Is(err, ErrMediaUnknown) {
		t.Fatalf("another device's upload: got %v, want ErrMediaUnknown", err)
	}
	if _, err := in("m-y", "med_nope"); !errors.Is(err, ErrMediaUnknown) {
		t.Fatalf("an unknown id: got %v, want ErrMediaUnknown", err)
	}
	if _, err := s.MediaByID(c.ID, "med_big"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an upload no message took is readable: %v", err)
	}
	msg, err := in("m-1", "med_big")
	if err != nil || len(msg.Media) != 1 || msg.Media[0].Size != int64(len(big)) || msg.Media[0].ContentType != "image/png" {
		t.Fatalf("inbound with media: %+v %v", msg, err)
	}
	if _, err := in("m-2", "med_big"); !errors.Is(err, ErrMediaUnknown) {
		t.Fatalf("a file another message took: got %v, want ErrMediaUnknown", err)
	}
	if _, err := s.MediaByID(c.ID+1, "med_big"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another company reads the file: %v", err)
	}
	var got bytes.Buffer
	if n, err := s.CopyMedia(&got, "med_big"); err != nil || n != int64(len(big)) || !bytes.Equal(got.Bytes(), big) {
		t.Fatalf("read back %d bytes (%v), want the %d stored", n, err, len(big))
	}

	// Pruning: nothing before the age; then the orphans, never the taken file.
	if n, err := s.PruneMedia(now.Add(-time.Hour), 100); err != nil || n != 0 {
		t.Fatalf("prune before the age: %d %v", n, err)
	}
	if n, err := s.PruneMedia(now.Add(time.Hour), 1); err != nil || n != 1 {
		t.Fatalf("prune with limit 1: %d %v", n, err)
	}
	if n, err := s.PruneMedia(now.Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("prune the rest: %d %v", n, err)
	}
	if _, err := s.MediaByKey(c.ID, dev.ID, "c2/0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a pruned upload's key is still known: %v", err)
	}
	got.Reset()
	if n, _ := s.CopyMedia(&got, "med_orphan"); n != 0 {
		t.Fatalf("a pruned upload still has %d bytes", n)
	}
	if m, err := s.MediaByID(c.ID, "med_big"); err != nil || m.MessageID != msg.ID {
		t.Fatalf("the taken file after pruning: %+v %v", m, err)
	}
}

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
			if n, err := s.CopyMedia(io.Discard, "med_read"); err != nil || n != int64(len(data)) {
				b.Fatal(n, err)
			}
		}
	})
}
