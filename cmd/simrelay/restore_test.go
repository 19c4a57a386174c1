package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/boltstore"
)

// TestAdminRestore puts a backup of a running server back with admin
// restore: refused while the server runs and for a truncated or damaged
// backup, each leaving the store as it was; then, the server stopped, the
// backup replaces the store, which serves the backup's state, and the
// replaced store is kept beside it.
func TestAdminRestore(t *testing.T) {
	storetest.EmbeddedOnly(t, "admin restore puts back an embedded store file (PostgreSQL: pg_restore)")
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	srv := startServer(t, bin, st, "--admin-token", testAdminToken)
	code, backup := get(t, srv.url+"/admin/backup", testAdminToken)
	if code != 200 {
		t.Fatalf("GET /admin/backup: %d", code)
	}
	file := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(file, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	// A change after the backup, which the restore takes back.
	if res, body := post(t, srv.url+"/opt-outs", apiKey, `{"phone":"+15550001111"}`); res.StatusCode != 201 {
		t.Fatalf("POST /opt-outs: %d %s", res.StatusCode, body)
	}
	restore := func(from string) (string, error) {
		out, err := exec.Command(bin, "admin", "restore", from, "--data-dir", st.dir).CombinedOutput()
		return string(out), err
	}
	optedOut := func(url string) bool {
		code, body := get(t, url+"/opt-outs", apiKey)
		if code != 200 {
			t.Fatalf("GET /opt-outs: %d %s", code, body)
		}
		return strings.Contains(string(body), "+15550001111")
	}

	if out, err := restore(file); err == nil || !strings.Contains(out, "stop it first") || !strings.Contains(out, "nothing was changed") {
		t.Fatalf("restore under a running server: %v\n%s\nwant a refusal saying to stop it", err, out)
	}
	if !optedOut(srv.url) {
		t.Fatal("the refused restore changed the running server's store")
	}
	stopServer(t, srv)

	page := os.Getpagesize()
	root, _ := liveBoltPages(t, backup)
	damaged := append([]byte(nil), backup...)
	clear(damaged[int(root)*page : int(root+1)*page])
	for _, bad := range []struct {
		name, want string
		data       []byte
	}{
		{"truncated", "is truncated", backup[:len(backup)/2+100]},
		{"damaged", "has damaged pages", damaged},
	} {
		path := filepath.Join(t.TempDir(), bad.name+".db")
		if err := os.WriteFile(path, bad.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := restore(path); err == nil || !strings.Contains(out, bad.want) || !strings.Contains(out, "nothing was changed") {
			t.Fatalf("restore of a %s backup: %v\n%s\nwant a refusal saying it %s", bad.name, err, out, bad.want)
		}
	}

	live := filepath.Join(st.dir, boltstore.FileName)
	if out, err := restore(live); err == nil || !strings.Contains(out, "itself, not a backup") || !strings.Contains(out, "nothing was changed") {
		t.Fatalf("restore of the store onto itself: %v\n%s\nwant a refusal", err, out)
	}

	out, err := restore(file)
	if err != nil || !strings.Contains(out, "restored "+file) {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	kept, _ := filepath.Glob(filepath.Join(st.dir, boltstore.FileName+".before-restore-*"))
	if len(kept) != 1 {
		t.Fatalf("the replaced store is not kept beside it: %v\n%s", kept, out)
	}
	srv = startServer(t, bin, st)
	if code, body := get(t, srv.url+"/company", apiKey); code != 200 {
		t.Fatalf("GET /company on the restored store: %d %s", code, body)
	}
	if optedOut(srv.url) {
		t.Fatal("the restored store has a change made after its backup")
	}
}
