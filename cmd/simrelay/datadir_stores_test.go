package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/boltstore"
)

// A second terminal where SIMRELAY_DATABASE_URL was not exported (or was,
// where the first server runs on the embedded store) started a second
// server on a data dir another one uses: the embedded server took no
// node.lock and the one on PostgreSQL does not lock the store's file, so
// both ran, each clearing the other's uploads spool at its start, the
// first a new empty store beside the node's lock. Whatever their stores, a
// second server on a data dir is refused at once, naming it, creating
// nothing there, and the first keeps running.
func TestDataDirIsOneServersWhateverTheStore(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	bin := buildBinary(t)
	url := pgtest.URL(t)
	for _, tc := range []struct {
		name          string
		first, second testStore
	}{
		{"embedded then PostgreSQL", testStore{}, testStore{databaseURL: url}},
		{"PostgreSQL then embedded", testStore{databaseURL: url}, testStore{}},
	} {
		dir := t.TempDir()
		tc.first.dir, tc.second.dir = dir, dir
		first := startServer(t, bin, tc.first)
		// A second server that is not refused runs on: the deadline ends it.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, bin, serveArgs(tc.second)...).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "another simrelay server uses it") || !strings.Contains(string(out), dir) {
			t.Errorf("%s: a second server on the same data dir: got %v %q, want a refusal naming the dir", tc.name, err, out)
		}
		if tc.first.databaseURL != "" {
			if _, err := os.Stat(filepath.Join(dir, boltstore.FileName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: the refused embedded server made a store file beside the node (%v)", tc.name, err)
			}
		}
		if code, body := get(t, first.url+"/readyz", ""); code != 200 {
			t.Errorf("%s: the first server after the second was refused: /readyz %d %s", tc.name, code, body)
		}
		_ = first.cmd.Process.Kill()
		_ = first.cmd.Wait()
	}
}
