package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// MediaBudget is the daily storage budget (bytes per company) of the
// stores the media suites open: four chunks.
const MediaBudget = 4 * store.MediaChunkSize

// MediaStore is what the media suite calls.
type MediaStore interface {
	Base
	PutMedia(m store.Media, src io.Reader, now time.Time) (store.Media, bool, error)
	MediaByKey(companyID, deviceID uint64, key string) (store.Media, error)
	MediaByID(companyID uint64, id string) (store.Media, error)
	CopyMedia(w io.Writer, id string, off, n int64) (int64, error)
	PruneMedia(cutoff time.Time, limit int) (int, error)
}

// Media runs the suite of stored files on their own: uploads, their keys,
// the budget and the pruning of uploads no message took. Its stores have a
// daily storage budget of MediaBudget.
func Media(t *testing.T, open Opener[MediaStore]) {
	t.Run("Put", func(t *testing.T) { t.Parallel(); mediaPut(t, open(t)) })
	t.Run("PutConcurrent", func(t *testing.T) { t.Parallel(); mediaPutConcurrent(t, open(t)) })
	t.Run("Refusals", func(t *testing.T) { t.Parallel(); mediaRefusals(t, open(t)) })
	t.Run("Prune", func(t *testing.T) { t.Parallel(); mediaPrune(t, open(t)) })
}

// MediaMessagesStore is what the suite of files taken by messages calls.
type MediaMessagesStore interface {
	MediaStore
	AnnounceNumbers(companyID, deviceID uint64, channel string, addresses []string, now time.Time, limit int) ([]store.AgentNumber, error)
	StoreAgentInbound(m *store.Message, now func() time.Time) (store.Message, bool, error)
}

// MediaMessages runs the suite of files taken by the inbound messages that
// name them. Its stores have a daily storage budget of MediaBudget.
func MediaMessages(t *testing.T, open Opener[MediaMessagesStore]) {
	t.Run("Taken", func(t *testing.T) { t.Parallel(); mediaTaken(t, open(t)) })
}

// mediaTenant is a company with two devices.
type mediaTenant struct {
	company     store.Company
	dev, second store.Device
}

func mediaCompany(t *testing.T, s Base) mediaTenant {
	t.Helper()
	c, _ := Company(t, s)
	return mediaTenant{company: c, dev: Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique())), second: Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))}
}

// putFile stores data as the device's upload under key.
func putFile(s MediaStore, d store.Device, id, key string, data []byte, at time.Time) (store.Media, bool, error) {
	return s.PutMedia(store.Media{ID: id, CompanyID: d.CompanyID, DeviceID: d.ID, Key: key, ContentType: "image/png", Filename: "a.png", Size: int64(len(data))},
		bytes.NewReader(data), at)
}

// mediaID is a file id no other fixture uses.
func mediaID() string { return fmt.Sprintf("med_%d", unique()) }

// noRead is an upload that must not be read.
type noRead struct{ t *testing.T }

func (r noRead) Read([]byte) (int, error) {
	r.t.Error("the upload was read")
	return 0, io.EOF
}

// mediaPut: a file of more than one chunk reads back whole with its
// digest; a repeated key of the device answers the first upload without
// reading the new one; another device's key is its own; an upload no
// message took yet is nobody's to read by id.
func mediaPut(t *testing.T, s MediaStore) {
	w := mediaCompany(t, s)
	big := bytes.Repeat([]byte("0123456789abcdef"), store.MediaChunkSize/16*2+100) // two chunks and a bit
	id := mediaID()
	m, dup, err := putFile(s, w.dev, id, "c1/0", big, T0)
	sum := sha256.Sum256(big)
	want := store.Media{ID: id, CompanyID: w.company.ID, DeviceID: w.dev.ID, Key: "c1/0", ContentType: "image/png", Filename: "a.png",
		Size: int64(len(big)), SHA256: hex.EncodeToString(sum[:]), CreatedAt: T0}
	if err != nil || dup || !sameMedia(m, want) {
		t.Fatalf("put: %+v, dup %v (%v); want %+v", m, dup, err, want)
	}
	again, dup, err := s.PutMedia(store.Media{ID: mediaID(), CompanyID: w.company.ID, DeviceID: w.dev.ID, Key: "c1/0", ContentType: "text/plain", Size: 1}, noRead{t}, T0.Add(time.Minute))
	if err != nil || !dup || !sameMedia(again, want) {
		t.Fatalf("the key again: %+v, dup %v (%v); want the first upload", again, dup, err)
	}
	if got, err := s.MediaByKey(w.company.ID, w.dev.ID, "c1/0"); err != nil || !sameMedia(got, want) {
		t.Fatalf("by key: %+v (%v)", got, err)
	}
	for _, k := range []struct {
		company, device uint64
		key             string
	}{{w.company.ID, w.second.ID, "c1/0"}, {w.company.ID, w.dev.ID, "c1/1"}, {w.company.ID + 1000, w.dev.ID, "c1/0"}} {
		if _, err := s.MediaByKey(k.company, k.device, k.key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("by key %+v: %v, want ErrNotFound", k, err)
		}
	}
	var got bytes.Buffer
	if n, err := s.CopyMedia(&got, id, 0, -1); err != nil || n != int64(len(big)) || !bytes.Equal(got.Bytes(), big) {
		t.Fatalf("read back %d bytes (%v), want the %d stored", n, err, len(big))
	}
	// Parts of it, from any byte: within a chunk, across one chunk's end or
	// two, a whole chunk, its tail, and past its end (nothing).
	c, size := int64(store.MediaChunkSize), int64(len(big))
	for _, r := range []struct{ off, n int64 }{
		{0, 1}, {5, 10}, {c - 1, 2}, {c, c}, {c - 5, c + 10}, {size - 3, -1}, {size - 3, 100}, {2*c + 7, -1}, {size, -1}, {size + 10, 5}, {3, 0},
	} {
		got.Reset()
		want := big[min(r.off, size):]
		if r.n >= 0 {
			want = want[:min(r.n, int64(len(want)))]
		}
		if n, err := s.CopyMedia(&got, id, r.off, r.n); err != nil || n != int64(len(want)) || !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("%d bytes from %d: read %d (%v), want %d bytes and those", r.n, r.off, n, err, len(want))
		}
	}
	got.Reset()
	if _, err := s.MediaByID(w.company.ID, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an upload no message took, by id: %v, want ErrNotFound", err)
	}
	if _, err := s.MediaByID(0, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an upload no message took, by id without a company: %v, want ErrNotFound", err)
	}
	// The same key from the second device is another file.
	other, dup, err := putFile(s, w.second, mediaID(), "c1/0", []byte("small"), T0)
	if err != nil || dup || other.ID == id || other.DeviceID != w.second.ID || other.Size != 5 {
		t.Fatalf("the key from another device: %+v, dup %v (%v), want a new file", other, dup, err)
	}
	got.Reset()
	if n, err := s.CopyMedia(&got, other.ID, 0, -1); err != nil || n != 5 || got.String() != "small" {
		t.Fatalf("the small file: %q (%v)", got.String(), err)
	}
	empty, _, err := putFile(s, w.dev, mediaID(), "c1/2", nil, T0)
	if err != nil || empty.Size != 0 {
		t.Fatalf("an empty file: %+v (%v)", empty, err)
	}
	got.Reset()
	if n, err := s.CopyMedia(&got, empty.ID, 0, -1); err != nil || n != 0 {
		t.Fatalf("the empty file: %d bytes (%v)", n, err)
	}
	if n, err := s.CopyMedia(&got, "med_unknown", 0, -1); err != nil || n != 0 {
		t.Fatalf("an unknown file: %d bytes (%v), want none", n, err)
	}
}

// sameMedia compares records, their times as instants.
func sameMedia(a, b store.Media) bool {
	ta, tb := a.CreatedAt, b.CreatedAt
	a.CreatedAt, b.CreatedAt = time.Time{}, time.Time{}
	return a == b && ta.Equal(tb)
}

// errWriter fails every write.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("the client went away") }

// mediaPutConcurrent: uploads of one key at once store one file; each
// answers it, and the budget pays for it once.
func mediaPutConcurrent(t *testing.T, s MediaStore) {
	w := mediaCompany(t, s)
	data := bytes.Repeat([]byte{7}, store.MediaChunkSize+1)
	const n = 4
	out := make([]store.Media, n)
	dups := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			if out[i], dups[i], err = putFile(s, w.dev, mediaID(), "c1/0", data, T0); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	firsts := 0
	for i := range n {
		if !dups[i] {
			firsts++
		}
		if out[i].ID != out[0].ID || out[i].Size != int64(len(data)) {
			t.Errorf("upload %d: %+v, want the one file %s", i, out[i], out[0].ID)
		}
	}
	if firsts != 1 {
		t.Fatalf("%d uploads stored the file, want 1", firsts)
	}
	// Three more of that size fit the budget only if the first was paid once.
	for i := range 2 {
		if _, _, err := putFile(s, w.dev, mediaID(), fmt.Sprintf("c2/%d", i), data, T0); err != nil {
			t.Fatalf("upload %d after the concurrent ones: %v", i, err)
		}
	}
	if _, err := s.CopyMedia(errWriter{}, out[0].ID, 0, -1); err == nil {
		t.Fatal("a copy to a failing writer: no error")
	}
}

// mediaRefusals: an upload over the day's budget, one shorter than it
// says, or one for a device that is not the company's live one is refused
// and stores nothing; the budget renews the next day.
func mediaRefusals(t *testing.T, s MediaStore) {
	w := mediaCompany(t, s)
	other := mediaCompany(t, s)
	huge := bytes.Repeat([]byte{1}, MediaBudget)
	_, _, err := putFile(s, w.dev, mediaID(), "c1/0", huge, T0)
	var be *store.BudgetError
	if !errors.Is(err, store.ErrStorageBudget) || !errors.As(err, &be) || be.CompanyID != w.company.ID || be.Limit != MediaBudget {
		t.Fatalf("over the budget: %v, want a *BudgetError of the company", err)
	}
	if _, err := s.MediaByKey(w.company.ID, w.dev.ID, "c1/0"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused upload was stored: %v", err)
	}
	// Another company's budget is its own; the next day renews it.
	if _, _, err := putFile(s, other.dev, mediaID(), "c1/0", huge[:store.MediaChunkSize], T0); err != nil {
		t.Fatalf("another company: %v", err)
	}
	half := huge[:MediaBudget/2]
	if _, _, err := putFile(s, w.dev, mediaID(), "c2/0", half, T0); err != nil {
		t.Fatalf("half the budget: %v", err)
	}
	if _, _, err := putFile(s, w.dev, mediaID(), "c2/1", half, T0); !errors.Is(err, store.ErrStorageBudget) {
		t.Fatalf("the other half with the records' cost: %v, want ErrStorageBudget", err)
	}
	if _, _, err := putFile(s, w.dev, mediaID(), "c2/1", half, T0.Add(24*time.Hour)); err != nil {
		t.Fatalf("the next day: %v", err)
	}

	short := store.Media{ID: mediaID(), CompanyID: w.company.ID, DeviceID: w.dev.ID, Key: "c3/0", ContentType: "image/png", Size: 100}
	if _, _, err := s.PutMedia(short, bytes.NewReader(make([]byte, 99)), T0.Add(24*time.Hour)); err == nil {
		t.Fatal("an upload shorter than its size: stored")
	}
	long := short
	if _, _, err := s.PutMedia(long, bytes.NewReader(make([]byte, store.MediaChunkSize+1)), T0.Add(24*time.Hour)); err == nil {
		t.Fatal("an upload longer than its size: stored")
	}
	if _, err := s.MediaByKey(w.company.ID, w.dev.ID, "c3/0"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a short upload was stored: %v", err)
	}
	var buf bytes.Buffer
	if n, _ := s.CopyMedia(&buf, short.ID, 0, -1); n != 0 {
		t.Fatalf("a short upload left %d bytes", n)
	}
	for _, d := range []store.Device{{ID: other.dev.ID, CompanyID: w.company.ID}, {ID: w.second.ID + 1000, CompanyID: w.company.ID}} {
		if _, _, err := putFile(s, d, mediaID(), "c4/0", []byte("x"), T0.Add(24*time.Hour)); !errors.Is(err, store.ErrDeviceGone) {
			t.Errorf("device %d of company %d: %v, want ErrDeviceGone", d.ID, d.CompanyID, err)
		}
	}
}

// mediaPrune: uploads no message took go once older than the cutoff, the
// oldest first and at most limit a call, with their bytes and key.
func mediaPrune(t *testing.T, s MediaStore) {
	w := mediaCompany(t, s)
	var ids []string
	for i := range 3 {
		m, _, err := putFile(s, w.dev, mediaID(), fmt.Sprintf("c%d/0", i), []byte("orphan"), T0.Add(time.Duration(i)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	if n, err := s.PruneMedia(T0, 100); err != nil || n != 0 {
		t.Fatalf("prune before any is old enough: %d (%v)", n, err)
	}
	if n, err := s.PruneMedia(T0.Add(90*time.Second), 1); err != nil || n != 1 {
		t.Fatalf("prune with limit 1: %d (%v)", n, err)
	}
	if _, err := s.MediaByKey(w.company.ID, w.dev.ID, "c0/0"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the oldest upload after the prune: %v, want it gone", err)
	}
	if n, err := s.PruneMedia(T0.Add(90*time.Second), 100); err != nil || n != 1 {
		t.Fatalf("prune the rest before the cutoff: %d (%v)", n, err)
	}
	var buf bytes.Buffer
	for i, id := range ids {
		buf.Reset()
		n, err := s.CopyMedia(&buf, id, 0, -1)
		_, kerr := s.MediaByKey(w.company.ID, w.dev.ID, fmt.Sprintf("c%d/0", i))
		if kept := i == 2; err != nil || (n == 6) != kept || (kerr == nil) != kept {
			t.Errorf("upload %d after the prunes: %d bytes (%v), by key %v; want kept %v", i, n, err, kerr, kept)
		}
	}
	// A pruned key may be uploaded again.
	if m, dup, err := putFile(s, w.dev, mediaID(), "c0/0", []byte("again"), T0.Add(time.Hour)); err != nil || dup {
		t.Fatalf("a pruned key again: %+v, dup %v (%v)", m, dup, err)
	}
}

// mediaTaken: a message takes only uploads of its own device that no
// message took (ErrMediaUnknown otherwise); a taken file is readable by id
// within its company (or without one) and never pruned.
func mediaTaken(t *testing.T, s MediaMessagesStore) {
	w := mediaCompany(t, s)
	const account = "+15550001111"
	if _, err := s.AnnounceNumbers(w.company.ID, w.dev.ID, store.ChannelNameWhatsApp, []string{account}, T0, 0); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), store.MediaChunkSize/16+1)
	file, _, err := putFile(s, w.dev, mediaID(), "c1/0", data, T0)
	if err != nil {
		t.Fatal(err)
	}
	others, _, err := putFile(s, w.second, mediaID(), "c2/0", []byte("another device's"), T0)
	if err != nil {
		t.Fatal(err)
	}
	in := func(clientID string, ids ...string) (store.Message, error) {
		msg := store.Message{UUID: fmt.Sprintf("u-%d", unique()), CompanyID: w.company.ID, DeviceID: w.dev.ID, Channel: store.ChannelNameWhatsApp,
			Phone: "+15557654321", Account: account, ClientID: clientID}
		for _, id := range ids {
			msg.Media = append(msg.Media, store.MediaRef{ID: id})
		}
		out, _, err := s.StoreAgentInbound(&msg, func() time.Time { return T0 })
		return out, err
	}
	if _, err := in("m-x", others.ID); !errors.Is(err, store.ErrMediaUnknown) {
		t.Fatalf("another device's upload: %v, want ErrMediaUnknown", err)
	}
	if _, err := in("m-y", "med_nope"); !errors.Is(err, store.ErrMediaUnknown) {
		t.Fatalf("an unknown id: %v, want ErrMediaUnknown", err)
	}
	msg, err := in("m-1", file.ID)
	if err != nil || len(msg.Media) != 1 || msg.Media[0] != file.Ref() {
		t.Fatalf("inbound with a file: %+v (%v), want its ref %+v", msg.Media, err, file.Ref())
	}
	if _, err := in("m-2", file.ID); !errors.Is(err, store.ErrMediaUnknown) {
		t.Fatalf("a file another message took: %v, want ErrMediaUnknown", err)
	}
	for _, c := range []uint64{w.company.ID, 0} {
		if got, err := s.MediaByID(c, file.ID); err != nil || got.MessageID != msg.ID || got.ID != file.ID || got.Size != file.Size {
			t.Fatalf("the taken file by id in company %d: %+v (%v), want it with message %d", c, got, err, msg.ID)
		}
	}
	if _, err := s.MediaByID(w.company.ID+1000, file.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another company reads the file: %v, want ErrNotFound", err)
	}
	if n, err := s.PruneMedia(T0.Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("prune: %d (%v), want the other device's upload only", n, err)
	}
	var got bytes.Buffer
	if n, err := s.CopyMedia(&got, file.ID, 0, -1); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("the taken file after the prune: %d bytes (%v)", n, err)
	}
	if m, err := s.MediaByKey(w.company.ID, w.dev.ID, "c1/0"); err != nil || m.MessageID != msg.ID {
		t.Fatalf("the taken file by key: %+v (%v)", m, err)
	}
}
