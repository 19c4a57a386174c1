package media

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"

	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

func TestContentTypeAndDisposition(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	html := []byte("<!DOCTYPE html><script>alert(1)</script>")
	for _, c := range []struct {
		declared string
		head     []byte
		want     string
		inline   bool
	}{
		{"image/png", png, "image/png", true},
		{"IMAGE/PNG; name=x", png, "image/png", true},
		{"image/png", html, "application/octet-stream", false}, // a page labelled as an image
		{"image/jpeg", png, "application/octet-stream", false}, // the bytes say otherwise
		{"text/html", html, "application/octet-stream", false},
		{"image/svg+xml", []byte("<svg onload=alert(1)>"), "application/octet-stream", false},
		{"application/pdf", []byte("%PDF-1.4"), "application/pdf", false},
		{"text/plain", []byte("hello"), "text/plain; charset=utf-8", false},
		{"image/heic", []byte("....ftypheic"), "image/heic", false},
		{"", png, "application/octet-stream", false},
		{"not a type", png, "application/octet-stream", false},
	} {
		got := ContentType(c.declared, c.head)
		if got != c.want || Inline(got) != c.inline {
			t.Errorf("ContentType(%q): got %q inline %v, want %q inline %v", c.declared, got, Inline(got), c.want, c.inline)
		}
	}
	for _, c := range []struct {
		m    store.Media
		want string
	}{
		{store.Media{ID: "med_1", ContentType: "image/png"}, "inline; filename=med_1"},
		{store.Media{ID: "med_2", ContentType: "application/pdf", Filename: "Quote 7.pdf"}, `attachment; filename="Quote 7.pdf"`},
		{store.Media{ID: "med_3", ContentType: "application/octet-stream", Filename: "résumé.doc"}, "attachment; filename*=utf-8''r%C3%A9sum%C3%A9.doc"},
	} {
		if got := Disposition(c.m); got != c.want {
			t.Errorf("Disposition(%+v): got %q, want %q", c.m, got, c.want)
		}
	}
}

// TestNewClearsSpoolsLeftByACrash: an upload's temporary file outlives a
// server killed while it arrived; the next start removes it from the
// server's own spool directory, and nothing else there.
func TestNewClearsSpoolsLeftByACrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	left, other := filepath.Join(dir, "simrelay-upload-123"), filepath.Join(dir, "notes.txt")
	for _, p := range []string{left, other} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(Config{Key: []byte("0123456789abcdef"), TempDir: dir}, storetest.Open(t), time.Now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the spool a crash left: %v, want it removed", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another file of the directory: %v, want it kept", err)
	}
}

// The spool directory is a path the operator chose (the data directory's
// uploads/), read as a name, not a pattern: one whose path holds a '['
// made the start fail ("syntax error in pattern"), and one with a '*'
// cleared the spools of every directory it matched, another server's
// arriving uploads included.
func TestNewClearsOnlyItsOwnSpoolWhateverItsPath(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	for _, c := range []struct{ dir, neighbour string }{
		{filepath.Join(base, "data[1]", "uploads"), ""},
		{filepath.Join(base, "a*", "uploads"), filepath.Join(base, "ab", "uploads")},
	} {
		var files []string
		for _, d := range []string{c.dir, c.neighbour} {
			if d == "" {
				continue
			}
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(d, "simrelay-upload-123")
			if err := os.WriteFile(f, []byte("partial"), 0o600); err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		if _, err := New(Config{Key: []byte("0123456789abcdef"), TempDir: c.dir}, storetest.Open(t), time.Now); err != nil {
			t.Fatalf("spool %s: %v", c.dir, err)
		}
		if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
			t.Errorf("spool %s: the file a crash left: %v, want it removed", c.dir, err)
		}
		if len(files) > 1 {
			if _, err := os.Stat(files[1]); err != nil {
				t.Errorf("spool %s: another directory's spool %s: %v, want it kept", c.dir, files[1], err)
			}
		}
	}
}

// TestMain stops the PostgreSQL cluster of a run on it (storetest.EnvStore).
func TestMain(m *testing.M) { storetest.Main(m) }

// The refusal counts its uploads right, one or many.
func TestUploadsBusyCountsRight(t *testing.T) {
	for _, c := range []struct {
		who  string
		n    int
		want string
	}{
		{"device", 1, "The device has 1 upload under way, the most at once; retry in 5 seconds."},
		{"company", 4, "The company has 4 uploads under way, the most at once; retry in 5 seconds."},
	} {
		if got := uploadsBusy(c.who, c.n); got.Message != c.want || got.Code != problem.RateLimited || got.RetryAfter != 5 {
			t.Errorf("uploadsBusy(%q, %d) = %+v, want 429 %q, Retry-After 5", c.who, c.n, got, c.want)
		}
	}
}

// An upload whose body breaks off is the request's: 400, the spool gone.
func TestUploadCutShortIsTheRequests(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := New(Config{Key: []byte("0123456789abcdef"), TempDir: dir}, storetest.Open(t), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	cut := errors.New("connection reset by peer")
	body := io.MultiReader(bytes.NewReader(make([]byte, 1000)), iotest.ErrReader(cut))
	_, _, err = s.Put(context.Background(), store.Device{ID: 1, CompanyID: 1},
		Upload{Key: "wa:1/0", ContentType: "application/pdf", Length: 2000, Body: body})
	if !problem.Is(err, problem.ValidationFailed) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("an upload cut short: %v, want validation_failed", err)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Fatalf("the spool directory after the upload: %v %v, want empty", left, err)
	}
}
