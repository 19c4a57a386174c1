package boltstore

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FuzzTypedRecordsAsAny holds getMessage and getConversation, which read a
// record without passing the value through an interface, to getJSON: the
// same value (read into a value filled beforehand, as a JSON record is
// merged into it) and the same error for any stored bytes, compact, JSON
// or neither; and putMessage and putConversation to putJSON's bytes for
// the same value.
func FuzzTypedRecordsAsAny(f *testing.F) {
	for _, raw := range recordSeeds(f) {
		f.Add(raw)
	}
	f.Add([]byte{})
	f.Add([]byte{tagMessageHanded})
	f.Add([]byte(`{"id":7,"phone":"+15550100","attempts":[{}]}`))
	f.Add([]byte(`{"id":"seven"}`))
	f.Add([]byte(`[1,2]`))
	db, err := bolt.Open(filepath.Join(f.TempDir(), "records.db"), 0o600, &bolt.Options{NoSync: true, Timeout: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	name, key := []byte("records"), []byte("k")
	f.Fuzz(func(t *testing.T, raw []byte) {
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(name)
			if err != nil {
				return err
			}
			if err := b.Put(key, raw); err != nil {
				return err
			}
			var want, got Message
			filled(t, &want)
			filled(t, &got)
			werr, gerr := getJSON(b, key, &want), getMessage(b, key, &got)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(want, got) {
				t.Fatalf("message record %q: getJSON %+v, %v; getMessage %+v, %v", raw, want, werr, got, gerr)
			}
			var wantC, gotC Conversation
			filled(t, &wantC)
			filled(t, &gotC)
			werr, gerr = getJSON(b, key, &wantC), getConversation(b, key, &gotC)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(wantC, gotC) {
				t.Fatalf("conversation record %q: getJSON %+v, %v; getConversation %+v, %v", raw, wantC, werr, gotC, gerr)
			}
			// What was read, written back both ways, is the same bytes.
			if werr == nil {
				if err := putJSON(b, key, wantC); err != nil {
					return err
				}
				asAny := bytes.Clone(b.Get(key))
				if err := putConversation(b, key, &gotC); err != nil {
					return err
				}
				if !bytes.Equal(b.Get(key), asAny) {
					t.Fatalf("conversation %+v: putJSON wrote %q, putConversation %q", gotC, asAny, b.Get(key))
				}
			}
			if err := putJSON(b, key, want); err != nil {
				return err
			}
			asAny := bytes.Clone(b.Get(key))
			if err := putMessage(b, key, &got); err != nil {
				return err
			}
			if !bytes.Equal(b.Get(key), asAny) {
				t.Fatalf("message %+v: putJSON wrote %q, putMessage %q", got, asAny, b.Get(key))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
