package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/store/boltstore"
)

// TestDataDirErrorsNameTheFlag: a data dir the store cannot be opened in
// (a file where the directory should be, a store another process holds) is
// said with the flag and its environment twin, so the operator knows what
// to change; the store's own words follow.
func TestDataDirErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "admin", "create-company", "--company", "Acme", "--email", "ana@acme.test", "--password", "Correct horse 9", "--data-dir", file)
	want := `--data-dir (SIMRELAY_DATA_DIR) "` + file + `": `
	if code != 1 || out != "" || !strings.Contains(errOut, want) || !strings.Contains(errOut, "not a directory") {
		t.Errorf("a file as the data dir: got %d %q %q, want 1 and %q with the cause", code, out, errOut, want)
	}

	dir := t.TempDir()
	if code, _, errOut := runCmd(t, "admin", "create-company", "--company", "Acme", "--email", "ana@acme.test", "--password", "Correct horse 9", "--data-dir", dir); code != 0 {
		t.Fatalf("create-company: %d %s", code, errOut)
	}
	st, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	code, out, errOut = runCmd(t, "admin", "set-plan", "--company", "1", "--plan", "pro", "--data-dir", dir)
	want = `--data-dir (SIMRELAY_DATA_DIR) "` + dir + `": `
	if code != 1 || out != "" || !strings.Contains(errOut, want) || !strings.Contains(errOut, "in use by another process") {
		t.Errorf("a store in use: got %d %q %q, want 1 and %q saying it is in use", code, out, errOut, want)
	}
}
