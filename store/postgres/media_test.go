package postgres

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// lockMedia and attachMedia, as an inbound message's transaction calls them: a message
// takes only uploads of its own device that no other message took, and a
// refusal fails its transaction; a taken file is readable by id and never
// pruned. (The MediaMessages suite holds StoreAgentInbound to the same.)
func TestAttachMedia(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{})
	c, _ := conformance.Company(t, s)
	dev := conformance.Device(t, s, c.ID, "fp-attach")
	other := conformance.Device(t, s, c.ID, "fp-attach-other")
	put := func(d store.Device, mediaID, key string) store.Media {
		t.Helper()
		m, _, err := s.PutMedia(store.Media{ID: mediaID, CompanyID: c.ID, DeviceID: d.ID, Key: key, ContentType: "image/png", Size: 4}, bytes.NewReader([]byte("data")), conformance.T0)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	mine, others := put(dev, "med_mine", "k1"), put(other, "med_others", "k2")
	attach := func(messageID uint64, ids ...string) (store.Message, error) {
		m := store.Message{ID: messageID, CompanyID: c.ID, DeviceID: dev.ID}
		for _, id := range ids {
			m.Media = append(m.Media, store.MediaRef{ID: id})
		}
		err := s.write("attach", func(t *txn) error {
			files, err := lockMedia(t, &m)
			if err != nil {
				return err
			}
			return attachMedia(t, &m, files)
		})
		return m, err
	}
	for _, ids := range [][]string{{others.ID}, {"med_nope"}, {mine.ID, others.ID}} {
		if _, err := attach(7, ids...); !errors.Is(err, store.ErrMediaUnknown) {
			t.Fatalf("attach %v: %v, want ErrMediaUnknown", ids, err)
		}
	}
	if _, err := s.MediaByID(c.ID, mine.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused attach took the file: %v", err)
	}
	m, err := attach(7, mine.ID)
	if err != nil || len(m.Media) != 1 || m.Media[0] != mine.Ref() {
		t.Fatalf("attach: %+v (%v), want the file's ref", m.Media, err)
	}
	if got, err := s.MediaByID(c.ID, mine.ID); err != nil || got.MessageID != 7 {
		t.Fatalf("the taken file: %+v (%v)", got, err)
	}
	if _, err := attach(8, mine.ID); !errors.Is(err, store.ErrMediaUnknown) {
		t.Fatalf("a file another message took: %v, want ErrMediaUnknown", err)
	}
	if n, err := s.PruneMedia(conformance.T0.Add(48*time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("prune: %d (%v), want the other device's upload only", n, err)
	}
	if _, err := s.MediaByID(0, mine.ID); err != nil {
		t.Fatalf("the taken file after the prune: %v", err)
	}
}
