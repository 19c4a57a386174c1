package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// What the server answers an upload decides whether the file waits for
// another try or the message goes without it: only a refusal for good (a
// 400 of the file itself, 413) drops it. 408 is the server cutting an
// upload that stalled on a slow link: the file is uploaded again.
func TestUploadRetriesWhatTheServerMayGetOver(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, []byte("the bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		status int
		retry  bool
	}{
		{http.StatusRequestTimeout, true},
		{http.StatusTooManyRequests, true},
		{http.StatusServiceUnavailable, true},
		{http.StatusForbidden, true},
		{http.StatusBadRequest, false},
		{http.StatusRequestEntityTooLarge, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
		}))
		a := New(Options{Config: ConfigFile{Server: srv.URL, DeviceToken: "dt_x"}, HTTPClient: srv.Client()})
		_, retry, err := a.upload(context.Background(), "wa:1", 0, spooled{Path: path, ContentType: "image/png", Size: 9})
		srv.Close()
		if err == nil || (retry > 0) != c.retry {
			t.Errorf("%d: retry in %v (%v), want a retry: %v", c.status, retry, err, c.retry)
		}
	}
}

// An upload may take UploadStall for each 256 KiB, as the server lets it,
// not one bound whatever its size; one past that is given up (and tried
// again).
func TestUploadTakesTheTimeItsSizeNeeds(t *testing.T) {
	t.Parallel()
	const size = 4 * uploadStep
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 32<<10)
		var got int
		for {
			n, err := r.Body.Read(buf)
			got += n
			if err != nil {
				break
			}
			if r.URL.Query().Get("key") == "stalls/0" && got >= uploadStep/2 {
				<-release // the link stops: nothing more is read
				return
			}
			time.Sleep(40 * time.Millisecond) // a slow link: 32 KiB every 40 ms, 1 MiB in about 1.3 s
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"med_%d"}`, got)
	}))
	defer srv.Close()
	a := New(Options{Config: ConfigFile{Server: srv.URL, DeviceToken: "dt_x"}, HTTPClient: srv.Client(), UploadStall: time.Second})
	// Longer in all than UploadStall, within its time for 1 MiB (5 s).
	id, _, err := a.upload(context.Background(), "slow", 0, spooled{Path: path, ContentType: "video/mp4", Size: size})
	if err != nil || id != fmt.Sprintf("med_%d", size) {
		t.Fatalf("a slow upload that keeps going: %q (%v), want all %d bytes taken", id, err, size)
	}
	_, retry, err := a.upload(context.Background(), "stalls", 0, spooled{Path: path, ContentType: "video/mp4", Size: size})
	close(release)
	if err == nil || retry <= 0 {
		t.Fatalf("a stalled upload: retry in %v (%v), want given up and tried again later", retry, err)
	}
}
