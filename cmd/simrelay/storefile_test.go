package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/boltstore"
	bolt "go.etcd.io/bbolt"
)

// TestDamagedStoreFileStopsClearly starts the real binary on data files that
// are not whole stores: it must stop with a message saying what the file is
// and what to do, never with SIGBUS and a goroutine dump.
func TestDamagedStoreFileStopsClearly(t *testing.T) {
	storetest.EmbeddedOnly(t, "damaged store files")
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	src := t.TempDir()
	createCompany(t, bin, testStore{dir: src})
	prefill(t, src, "file-phone", 2)
	backup := filepath.Join(t.TempDir(), "whole.db")
	if out, err := exec.Command(bin, "admin", "backup", backup, "--data-dir", src).CombinedOutput(); err != nil {
		t.Fatalf("admin backup: %v %s", err, out)
	}
	whole, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize()
	half := len(whole) / 2 / page * page
	random := make([]byte, 64<<10)
	_, _ = rand.Read(random)

	// The pages the newer header names: the root bucket's and the
	// freelist's. Overwritten, the file keeps its size and its headers, so
	// only a walk of its pages finds the damage.
	root, freelist := liveBoltPages(t, whole)
	overwrite := func(pgid uint64) []byte {
		b := append([]byte(nil), whole...)
		copy(b[int(pgid)*page:int(pgid+1)*page], random)
		return b
	}

	serve := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir"}
	mail := []string{"admin", "mail", "--data-dir"}
	check := []string{"admin", "check", "--data-dir"}
	cases := []struct {
		name    string
		data    []byte
		want    string
		refused [][]string // the commands that must refuse the file, each given the data dir last
	}{
		{"cut in half at a page", whole[:half], "is truncated", [][]string{serve, mail, check}},
		{"cut mid-page", whole[:half+100], "is truncated", [][]string{serve, mail, check}},
		{"only the first page", whole[:page], "is truncated", [][]string{serve, mail, check}},
		{"random bytes", random, "is not a simrelay store", [][]string{serve, mail, check}},
		{"its root page overwritten", overwrite(root), "has damaged pages", [][]string{serve, mail, check}},
		// A read-only open does not read the freelist: admin mail still
		// reads the outbox, and a start (which writes) refuses the file.
		{"its freelist page overwritten", overwrite(freelist), "has damaged pages", [][]string{serve, check}},
		// A page deep in the file is not read at start (the walk costs
		// seconds a GB); admin check walks every page and finds it.
		{"a leaf page overwritten", overwrite(deepLeafPage(t, backup, root)), "has damaged pages", [][]string{check}},
		{"a text file", []byte("name,phone\nAna,+15550100000\n"), "is not a simrelay store", [][]string{serve, mail, check}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, boltstore.FileName), tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range tc.refused {
				args := append(append([]string(nil), cmd...), dir)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
				cancel()
				text := string(out)
				if err == nil {
					t.Fatalf("%s: exited 0, want a refusal:\n%s", strings.Join(args[:2], " "), text)
				}
				if !strings.Contains(text, tc.want) || !strings.Contains(text, "restore it from a backup") || !strings.Contains(text, boltstore.FileName) {
					t.Errorf("%s: got\n%s\nwant a message that the file %s and what to do", strings.Join(args[:2], " "), text, tc.want)
				}
				if strings.Contains(text, "SIGBUS") || strings.Contains(text, "goroutine ") || strings.Contains(text, "unexpected fault") {
					t.Errorf("%s: crashed:\n%s", strings.Join(args[:2], " "), text)
				}
			}
		})
	}

	// A zero-length file, as a first start on a full disk leaves it, is given a new store.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, boltstore.FileName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, bin, testStore{dir: dir})
	if code, _ := get(t, srv.url+"/readyz", ""); code != 200 {
		t.Fatalf("/readyz on a re-initialised store: got %d", code)
	}
	if !strings.Contains(srv.stderr.String(), "the data file is empty") {
		t.Errorf("no word in the log about the empty file:\n%s", srv.stderr.String())
	}
}

// liveBoltPages reads the root bucket's and the freelist's page ids from the
// newer of a bbolt file's two headers (page header 16 bytes, then magic,
// version, page size, flags, root bucket (pgid, sequence), freelist, high
// water mark, txid; machine byte order).
func liveBoltPages(t *testing.T, file []byte) (root, freelist uint64) {
	t.Helper()
	page := os.Getpagesize()
	var txid uint64
	for i := range 2 {
		m := file[i*page+16:]
		if tx := binary.NativeEndian.Uint64(m[48:]); i == 0 || tx > txid {
			txid, root, freelist = tx, binary.NativeEndian.Uint64(m[16:]), binary.NativeEndian.Uint64(m[32:])
		}
	}
	if root < 2 || freelist < 2 || int(max(root, freelist)+1)*page > len(file) {
		t.Fatalf("header names root page %d and freelist page %d in a file of %d bytes", root, freelist, len(file))
	}
	return root, freelist
}

// deepLeafPage is a leaf page of the store file at path that holds records
// (neither free nor the root bucket's page), found through bbolt on a copy:
// damage there passes every check a start makes.
func deepLeafPage(t *testing.T, path string, root uint64) uint64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(cp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(cp, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var leaf uint64
	err = db.View(func(tx *bolt.Tx) error {
		for id := tx.Size()/int64(db.Info().PageSize) - 1; id > 2 && leaf == 0; id-- {
			info, err := tx.Page(int(id))
			if err != nil {
				return err
			}
			if info != nil && info.Type == "leaf" && uint64(id) != root {
				leaf = uint64(id)
			}
		}
		return nil
	})
	if err != nil || leaf == 0 {
		t.Fatalf("no leaf page in %s: %v", path, err)
	}
	return leaf
}
