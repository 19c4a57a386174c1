package media

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// An upload whose company is marked closing (MarkCompanyClosing) after
// the server checked its token again (Recheck), before the file is
// stored, is refused as one of a device deleted (401 unauthorized:
// PROTOCOL.md section 16.3) and stores nothing: the store's write reads
// the mark in its own transaction. It stored the file and answered it,
// and the removal took it after.
func TestUploadOfACompanyClosingAfterItsRecheck(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c, _ := conformance.Company(t, st)
	dev := conformance.Device(t, st, c.ID, "upload-closing")
	s, err := New(Config{Key: []byte("0123456789abcdef"), TempDir: t.TempDir()}, st, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("a file that arrived whole")
	m, dup, err := s.Put(context.Background(), dev, Upload{Key: "wa:1/0", ContentType: "text/plain", Length: int64(len(data)), Body: bytes.NewReader(data),
		Recheck: func() error {
			_, err := st.MarkCompanyClosing(c.ID, time.Now(), func(store.Company, store.Subscription, bool) error { return nil })
			return err
		}})
	if !problem.Is(err, problem.Unauthorized) || dup || m.ID != "" {
		t.Fatalf("an upload whose company was marked closing after its recheck: %+v (dup %v, %v), want 401 unauthorized", m, dup, err)
	}
	if got, err := st.MediaByKey(c.ID, dev.ID, "wa:1/0"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the upload was stored: %+v (%v)", got, err)
	}
}
