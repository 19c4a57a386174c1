package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
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
			n, err := io.ReadFull(r.Body, buf)
			got += n
			if err != nil {
				break
			}
			if r.URL.Query().Get("key") == "stalls/0" && got >= uploadStep/2 {
				<-release // the link stops: nothing more is read
				return
			}
			time.Sleep(20 * time.Millisecond) // a slow link: 32 KiB every 20 ms, 1 MiB in 0.64 s and more
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"med_%d"}`, got)
	}))
	defer srv.Close()
	a := New(Options{Config: ConfigFile{Server: srv.URL, DeviceToken: "dt_x"}, HTTPClient: srv.Client(), UploadStall: 500 * time.Millisecond})
	// Longer in all than UploadStall, within its time for 1 MiB (2.5 s).
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

// A file's wait for another upload (the server answered 503) is forgotten
// once its message leaves the journal's uploads: refused for good here.
// The waits were kept for the agent's life, one per file that ever waited.
func TestUploadWaitsForgottenWithTheirFiles(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 100
	dir := t.TempDir()
	var frames []proto.Inbound
	var keys []string
	var refs [][]string
	var files [][]spooled
	for i := range n {
		path := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(path, []byte("the bytes"), 0o600); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("s1:wa-%d", i)
		frames = append(frames, proto.Inbound{ClientID: id, Channel: proto.ChannelWhatsApp, From: "+15551234567", Message: "a photo", ReceivedAt: stamp(time.Now())})
		keys = append(keys, id)
		refs = append(refs, nil)
		files = append(files, []spooled{{Path: path, ContentType: "image/png", Size: 9}})
	}
	if _, err := j.takeInbound(frames, keys, refs, files, "", ""); err != nil {
		t.Fatal(err)
	}
	a := New(Options{Config: ConfigFile{Server: srv.URL, DeviceToken: "dt_x"}, HTTPClient: srv.Client(), Journal: j})
	later := map[string]time.Time{}
	a.uploadRound(context.Background(), later)
	if len(later) != n {
		t.Fatalf("%d files wait for another upload after a 503, want %d", len(later), n)
	}
	for _, f := range frames[1:] {
		if _, _, err := j.ackInbound(f.ClientID, true); err != nil {
			t.Fatal(err)
		}
	}
	a.uploadRound(context.Background(), later)
	if len(later) != 1 {
		t.Fatalf("%d files wait for another upload once %d of their messages were refused for good, want 1", len(later), n-1)
	}
	if _, ok := later[files[0][0].Path]; !ok {
		t.Errorf("the file still waiting lost its wait: %v", later)
	}
}
