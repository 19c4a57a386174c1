package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/store/boltstore"
)

// v1StoreDir is a data dir holding the oldest store there is (schema
// version 1, store/boltstore/testdata), for a start to migrate.
func v1StoreDir(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "store", "boltstore", "testdata", "v1", boltstore.FileName))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, boltstore.FileName), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// storeVersion is the schema version of the store in dir.
func storeVersion(t *testing.T, dir string) uint64 {
	t.Helper()
	st, err := boltstore.Open(dir, boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := st.Version()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A stop (Ctrl-C, SIGTERM) that comes while a start migrates the embedded
// store stops the migration: the server exits 1 saying so, and the next
// start resumes it. The stop waited for the whole migration (about 40 s
// for 1.5 GB), then started the server only to shut it down. Here the stop
// came before the start, so no step ran.
func TestServeStoppedDuringAMigration(t *testing.T) {
	storetest.EmbeddedOnly(t, "the embedded store's migrations")
	t.Parallel()
	dir := v1StoreDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr syncbuf.Buffer
	code := run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "the migration of") || !strings.Contains(stderr.String(), "the next start resumes it") {
		t.Errorf("serve stopped while it migrates: exit %d\n%s", code, stderr.String())
	}
	if strings.Contains(stdout.String(), "listening") {
		t.Errorf("the stopped server listened:\n%s", stdout.String())
	}
	if v := storeVersion(t, dir); v != 1 {
		t.Errorf("the store is at schema %d after the stopped start, want 1 (no step ran)", v)
	}
}

// A start that migrates the store says so before it begins, with the
// versions, and once it is done, before the server listens: a large
// store's migration took its time without a word.
func TestServeSaysItMigratesTheStore(t *testing.T) {
	storetest.EmbeddedOnly(t, "the embedded store's migrations")
	t.Parallel()
	dir := v1StoreDir(t)
	srv := startServer(t, buildBinary(t), testStore{dir: dir})
	// The listening line on stdout can come before the log's on stderr.
	poll.Until(t, "the log's listening line", func() bool { return strings.Contains(srv.stderr.String(), `msg="simrelay listening"`) })
	logs := srv.stderr.String()
	want := []string{`msg="migrating the data file to this build's schema; a stop resumes it at the next start"`, "from=1", "to=" + strconv.FormatUint(boltstore.SchemaVersion(), 10), `msg="the data file is migrated"`, "took="}
	for _, w := range want {
		if !strings.Contains(logs, w) {
			t.Errorf("the start's log lacks %q:\n%s", w, logs)
		}
	}
	if i, j := strings.Index(logs, "the data file is migrated"), strings.Index(logs, "simrelay listening"); i < 0 || j < i {
		t.Errorf("the migration's end is not logged before the server listens:\n%s", logs)
	}

	// A store already at this build's schema is no migration.
	again := startServer(t, buildBinary(t), testStore{dir: emptyStoreDir(t)})
	if strings.Contains(again.stderr.String(), "migrat") {
		t.Errorf("a start on a current store speaks of a migration:\n%s", again.stderr.String())
	}
}
