package main

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/boltstore"
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

	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"cut in half at a page", whole[:half], "is truncated"},
		{"cut mid-page", whole[:half+100], "is truncated"},
		{"only the first page", whole[:page], "is truncated"},
		{"random bytes", random, "is not a simrelay store"},
		{"a text file", []byte("name,phone\nAna,+15550100000\n"), "is not a simrelay store"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, boltstore.FileName), tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir},
				{"admin", "mail", "--data-dir", dir},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
				cancel()
				text := string(out)
				if err == nil {
					t.Fatalf("%s: exited 0, want a refusal:\n%s", args[0], text)
				}
				if !strings.Contains(text, tc.want) || !strings.Contains(text, "restore it from a backup") || !strings.Contains(text, boltstore.FileName) {
					t.Errorf("%s: got\n%s\nwant a message that the file %s and what to do", args[0], text, tc.want)
				}
				if strings.Contains(text, "SIGBUS") || strings.Contains(text, "goroutine ") || strings.Contains(text, "unexpected fault") {
					t.Errorf("%s: crashed:\n%s", args[0], text)
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
