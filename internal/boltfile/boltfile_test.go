package boltfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// realFile is a bbolt file written by bbolt itself, with a few commits;
// it returns its path and what bbolt says of its newest meta: the txid
// and the size (high-water page id times page size) a read sees.
func realFile(t *testing.T) (path string, txid uint64, size int64) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "f.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 3 {
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte{byte(i)}, make([]byte, 3000))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.View(func(tx *bolt.Tx) error {
		txid, size = uint64(tx.ID()), tx.Size()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return path, txid, size
}

// Both meta pages of a file bbolt wrote decode as valid, and the newer
// says what bbolt says of the file: its txid and its size.
func TestReadAgreesWithBbolt(t *testing.T) {
	t.Parallel()
	path, txid, size := realFile(t)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m0, err := Read(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !m0.Valid() || m0.PageSize != uint32(os.Getpagesize()) {
		t.Fatalf("meta 0: %+v, want valid with the machine's page size %d", m0, os.Getpagesize())
	}
	m1, err := Read(f, int64(m0.PageSize))
	if err != nil {
		t.Fatal(err)
	}
	if !m1.Valid() || m1.PageSize != m0.PageSize {
		t.Fatalf("meta 1: %+v, want valid with meta 0's page size", m1)
	}
	newer := m0
	if m1.Txid > m0.Txid {
		newer = m1
	}
	if newer.Txid != txid || int64(newer.Pgid)*int64(newer.PageSize) != size {
		t.Fatalf("the newer meta: txid %d, %d pages of %d bytes; bbolt says txid %d, %d bytes", newer.Txid, newer.Pgid, newer.PageSize, txid, size)
	}
	if newer.Root < 2 || newer.Root >= newer.Pgid || newer.Freelist < 2 || newer.Freelist >= newer.Pgid {
		t.Fatalf("the newer meta: root page %d, freelist page %d, want pages of the file's %d", newer.Root, newer.Freelist, newer.Pgid)
	}
}

// A meta page that is not bbolt's, of another version or torn decodes,
// but is not valid; a short one does not decode.
func TestDecodeDamage(t *testing.T) {
	t.Parallel()
	path, _, _ := realFile(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head := data[:MetaLen]
	if m, ok := decode(head); !ok || !m.Valid() {
		t.Fatalf("the file's first meta: %+v %v, want valid", m, ok)
	}
	for _, c := range []struct {
		name string
		at   int
		want func(Meta) bool
	}{
		{"magic", PageHeaderSize, func(m Meta) bool { return m.Magic != Magic }},
		{"version", PageHeaderSize + 4, func(m Meta) bool { return m.Version != Version && !m.SumOK }},
		{"txid", PageHeaderSize + 48, func(m Meta) bool { return m.Magic == Magic && !m.SumOK }},
		{"checksum", MetaLen - 1, func(m Meta) bool { return m.Magic == Magic && m.Version == Version && !m.SumOK }},
	} {
		b := append([]byte(nil), head...)
		b[c.at] ^= 0x40
		m, ok := decode(b)
		if !ok || m.Valid() || !c.want(m) {
			t.Errorf("%s changed: %+v %v, want it decoded and not valid", c.name, m, ok)
		}
	}
	if _, ok := decode(head[:MetaLen-1]); ok {
		t.Error("a meta one byte short decoded")
	}
	short := filepath.Join(t.TempDir(), "short.db")
	if err := os.WriteFile(short, head[:MetaLen-1], 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(short)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Read(f, 0); !errors.Is(err, io.EOF) {
		t.Fatalf("a file one byte short of a meta: %v, want io.EOF", err)
	}
}

// Newest picks the meta page bbolt uses: the valid one of the higher txid,
// page 0 of a tie, and none when neither is valid.
func TestNewest(t *testing.T) {
	valid := func(txid uint64) Meta { return Meta{Magic: Magic, Version: Version, SumOK: true, Txid: txid} }
	torn := valid(9)
	torn.SumOK = false
	for _, c := range []struct {
		name   string
		m0, m1 Meta
		want   uint64 // Txid of the one used
		ok     bool
	}{
		{"page 1 newer", valid(4), valid(5), 5, true},
		{"page 0 newer", valid(6), valid(5), 6, true},
		{"a tie", Meta{Magic: Magic, Version: Version, SumOK: true, Txid: 7, Root: 1}, valid(7), 7, true},
		{"page 0 torn", torn, valid(5), 5, true},
		{"page 1 torn", valid(4), torn, 4, true},
		{"both torn", torn, torn, 0, false},
	} {
		got, ok := Newest(c.m0, c.m1)
		if ok != c.ok || got.Txid != c.want || c.name == "a tie" && got.Root != 1 {
			t.Errorf("%s: %+v %v, want txid %d %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
