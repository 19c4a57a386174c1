package boltstore

import (
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// A dump gives, kind by kind in store.Kinds' order, as many records of each
// kind as CopyCounts counts, from the oldest store there is (migrated) with
// messages, webhooks and a deleted device; its last ids come first. An
// unmigrated file is refused by both.
func TestDumpMatchesCounts(t *testing.T) {
	t.Parallel()
	dir := copyV1(t)
	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.CopyCounts(); err == nil {
		t.Error("CopyCounts of an unmigrated file: no error")
	}
	if err := ro.Dump(func(store.CopyRecord) error { return nil }); err == nil {
		t.Error("Dump of an unmigrated file: no error")
	}
	ro.Close()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, err := s.CopyCounts()
	if err != nil {
		t.Fatal(err)
	}
	got := map[store.Kind]int64{}
	var order []store.Kind
	var last store.CopyLastIDs
	if err := s.Dump(func(r store.CopyRecord) error {
		if ids, ok := r.(store.CopyLastIDs); ok {
			if len(order) > 0 || last != nil {
				t.Error("the last ids come after a record")
			}
			last = ids
			return nil
		}
		k := r.CopyKind()
		if _, ok := r.(store.CopyMediaChunk); ok {
			return nil // part of its file, not counted apart
		}
		if len(order) == 0 || order[len(order)-1] != k {
			order = append(order, k)
		}
		got[k]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range s.DumpKinds() {
		if got[k] != want[k] {
			t.Errorf("%s: the dump gives %d, CopyCounts counts %d", k, got[k], want[k])
		}
	}
	for _, k := range []store.Kind{store.KindCompanies, store.KindUsers, store.KindDevices, store.KindMessages, store.KindWebhookSets, store.KindWebhookDeliveries} {
		if got[k] == 0 {
			t.Errorf("the v1 store gives no %s", k)
		}
	}
	for i := 1; i < len(order); i++ {
		if indexOf(order[i-1]) >= indexOf(order[i]) {
			t.Errorf("the dump gives %s after %s, against store.Kinds' order", order[i], order[i-1])
		}
	}
	if last[store.KindMessages] == 0 || last[store.KindDevices] < 3 {
		t.Errorf("last ids: %v", last)
	}

	// An error of put ends the dump with it.
	stop := errors.New("stop")
	if err := s.Dump(func(store.CopyRecord) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Dump with a failing put: %v", err)
	}
}

func indexOf(k store.Kind) int {
	for i, x := range store.Kinds {
		if x == k {
			return i
		}
	}
	return -1
}

// Every bucket of a store is either dumped, as a kind or a part of one, or
// an index the destination derives; and every kind has a bucket.
func TestEveryBucketCopied(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kinds := map[store.Kind]bool{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			k, ok := bucketKinds[string(name)]
			if !ok {
				t.Errorf("bucket %s: no kind, nor said to be derived (bucketKinds in dump.go)", name)
			}
			kinds[k] = true
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range store.Kinds {
		if !kinds[k] {
			t.Errorf("kind %q has no bucket", k)
		}
	}
	for name := range bucketKinds {
		if err := s.db.View(func(tx *bolt.Tx) error {
			if tx.Bucket([]byte(name)) == nil {
				t.Errorf("bucketKinds names %s, which the store has not", name)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}
