package main

import (
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/boltstore"
	bolt "go.etcd.io/bbolt"
)

// admin mail opens the store read-only, so it migrates nothing: a file of
// another schema than this build's is refused, saying what to do, instead of
// being read as this build's.
func TestAdminMailRefusesAnotherSchema(t *testing.T) {
	storetest.EmbeddedOnly(t, "the embedded store's schema version")
	t.Parallel()
	for _, c := range []struct {
		name    string
		version uint64
		want    string
	}{
		{"an older schema", boltstore.SchemaVersion() - 1, "run this build's simrelay serve on it once"},
		{"a newer schema", boltstore.SchemaVersion() + 1, "run a newer simrelay"},
	} {
		dir := t.TempDir()
		st, err := boltstore.Open(dir, boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := bolt.Open(filepath.Join(dir, boltstore.FileName), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("meta")).Put([]byte("schema_version"), binary.BigEndian.AppendUint64(nil, c.version))
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runAdmin(t, "mail", "--data-dir", dir)
		if code != 1 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, boltstore.FileName) || out != "" {
			t.Errorf("%s: got %d %q %q, want exit code 1 and %q", c.name, code, out, errOut, c.want)
		}
	}
	// The store of this build's schema is read.
	dir := t.TempDir()
	st, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runAdmin(t, "mail", "--data-dir", dir); code != 0 || !strings.Contains(out, "empty") {
		t.Fatalf("this build's schema: got %d %q %q", code, out, errOut)
	}
}
