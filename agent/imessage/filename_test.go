package imessage

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/simrelay/simrelay/agent"
	proto "github.com/simrelay/simrelay/android-protocol"
)

// The file Messages is handed is named after the last element of the
// media_url's path, kept to a name the file system takes: "." and ".."
// (which named the temporary directory and its parent, so the write
// failed), a NUL, and more than 255 bytes (the most a macOS or Linux file
// name holds; a signed or generated link's name can be longer) each failed
// the send generic_failure, the file never sent.
func TestFileNameFromAnyMediaURLIsSent(t *testing.T) {
	t.Parallel()
	path, _ := testDB(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\nfake"))
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	osascript, calls := recordingOsascript(t)
	tr, err := New(Config{ChatDB: path, Osascript: osascript, Handles: []string{"me@icloud.com"},
		Media: agent.MediaFetcher{AllowPrivate: true, RootCAs: roots, Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 200) + ".png" // 404 bytes
	for i, c := range []struct{ path, want string }{
		{"/files/..", "file"},
		{"/files/.", "file"},
		{"/files/%2E%2E", "file"},
		{"/files/a%00b.png", "file.png"},
		{"/files/" + long, strings.Repeat("é", 125) + ".png"},
		{"/files/" + strings.Repeat("a", 300), strings.Repeat("a", 255)},
		{"/files/a%FFb.png", "a_b.png"},
		{"/files/label.png", "label.png"},
	} {
		job := agent.Job{Send: proto.Send{ID: "j", Channel: proto.ChannelIMessage, From: "me@icloud.com", To: "+15557654321",
			ContentType: "image", MediaURL: srv.URL + c.path}}
		out, err := tr.Execute(context.Background(), job)
		if err != nil || out.Status != proto.StatusSent {
			t.Errorf("%s: got %+v %v, want sent", c.path, out, err)
			continue
		}
		// osascript leaves two files a call (recordingOsascript).
		b, err := os.ReadFile(filepath.Join(calls, strconv.Itoa(2*i)+".args"))
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(args) != 4 || args[2] != "file" {
			t.Fatalf("%s: osascript argv %q, want a file send", c.path, args)
		}
		file := args[3]
		if name := filepath.Base(file); name != c.want || len(name) > 255 || !utf8.ValidString(name) {
			t.Errorf("%s: file name %q, want %q", c.path, name, c.want)
		}
		if !strings.HasPrefix(filepath.Base(filepath.Dir(file)), "simrelay-imessage-") {
			t.Errorf("%s: file %s, want it in its own temporary directory", c.path, file)
		}
		if data, err := os.ReadFile(file); err != nil || !strings.HasSuffix(string(data), "fake") {
			t.Errorf("%s: the file Messages is handed: %q %v", c.path, data, err)
		}
		os.RemoveAll(filepath.Dir(file))
	}
}
