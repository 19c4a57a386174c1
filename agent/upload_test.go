package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
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
		a := &Agent{opt: Options{Config: ConfigFile{Server: srv.URL, DeviceToken: "dt_x"}, HTTPClient: srv.Client()}}
		_, retry, err := a.upload(context.Background(), "wa:1", 0, spooled{Path: path, ContentType: "image/png", Size: 9})
		srv.Close()
		if err == nil || (retry > 0) != c.retry {
			t.Errorf("%d: retry in %v (%v), want a retry: %v", c.status, retry, err, c.retry)
		}
	}
}
