package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/boltstore"
)

// TestDataFileGoneRefusesWrites deletes a running server's data directory,
// then replaces its data file under another server: the file stays open in
// the process and took every write, so sends were answered 200 into a file
// no path names, lost at the next start. Each must now answer 503
// unavailable with the contract's error body, in words that name the data
// file (not a database out of reach), /readyz must fail, and the
// operator's backup must still copy the open file out.
func TestDataFileGoneRefusesWrites(t *testing.T) {
	storetest.EmbeddedOnly(t, "the embedded store's data file")
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	prefill(t, st.dir, "gone-phone", 0)
	sendBody := `{"device_fingerprint":"gone-phone","phone":"+15551234567","message":"hello"}`
	refused := func(t *testing.T, url, want string) {
		t.Helper()
		res, body := post(t, url+"/chat/send", apiKey, sendBody)
		if res.StatusCode != 503 || !strings.Contains(string(body), `"error":"unavailable"`) {
			t.Fatalf("a send after the data file went: got %d %s, want 503 unavailable", res.StatusCode, body)
		}
		// The client is told what happened: there is no database to reach.
		if !strings.Contains(string(body), "data file was deleted or replaced") || strings.Contains(string(body), "database") {
			t.Fatalf("a send after the data file went: %s, want a message naming the data file, not a database", body)
		}
		if res, body := post(t, url+"/opt-outs", apiKey, `{"phone":"+15557654321"}`); res.StatusCode != 503 {
			t.Fatalf("an opt-out after the data file went: got %d %s, want 503", res.StatusCode, body)
		}
		if code, body := get(t, url+"/readyz", ""); code != 503 {
			t.Fatalf("/readyz after the data file went: got %d %s, want 503", code, body)
		}
		if code, _ := get(t, url+"/company", apiKey); code != 200 {
			t.Fatalf("a read after the data file went: got %d, want 200 (the open file still reads)", code)
		}
		if _, err := os.Stat(filepath.Join(st.dir, boltstore.FileName)); err == nil && want == "was deleted" {
			t.Fatal("the refused writes made a new data file")
		}
	}

	t.Run("its directory deleted", func(t *testing.T) {
		srv := startServer(t, bin, st, "--admin-token", testAdminToken)
		if res, body := post(t, srv.url+"/chat/send", apiKey, sendBody); res.StatusCode != 200 {
			t.Fatalf("a send before: got %d %s", res.StatusCode, body)
		}
		saved := filepath.Join(t.TempDir(), "saved")
		if err := os.Rename(st.dir, saved); err != nil {
			t.Fatal(err)
		}
		refused(t, srv.url, "was deleted")
		// The log line reaches the test through a pipe, after the answers.
		poll.Until(t, "the log says the data file was deleted", func() bool {
			return strings.Contains(srv.stderr.String(), "was deleted while the server ran")
		})
		// The operator takes the data out of the open file: the backup
		// needs the directory back for its temporary copy.
		if err := os.MkdirAll(st.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		code, body := get(t, srv.url+"/admin/backup", testAdminToken)
		if code != 200 || len(body) == 0 {
			t.Fatalf("GET /admin/backup of the deleted file: got %d (%d bytes)", code, len(body))
		}
		_ = srv.cmd.Process.Kill()
		_ = srv.cmd.Wait()
		if err := os.WriteFile(filepath.Join(st.dir, boltstore.FileName), body, 0o600); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("its file replaced", func(t *testing.T) {
		srv := startServer(t, bin, st)
		if res, body := post(t, srv.url+"/chat/send", apiKey, sendBody); res.StatusCode != 200 {
			t.Fatalf("a send before: got %d %s", res.StatusCode, body)
		}
		path := filepath.Join(st.dir, boltstore.FileName)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		other := filepath.Join(st.dir, "restored.db")
		if err := os.WriteFile(other, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(other, path); err != nil {
			t.Fatal(err)
		}
		refused(t, srv.url, "was replaced")
		poll.Until(t, "the log says the data file was replaced", func() bool {
			return strings.Contains(srv.stderr.String(), "was replaced by another file")
		})
	})
}
