package gateway

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store/boltstore"
)

// A phone that links while the embedded store's data file is gone (deleted
// under the running server) cannot have its hello stored: the link closes
// with 1013, and the upgrades that follow are refused 503 unavailable in
// words that say what happened, not that the server cannot reach a
// database it does not have.
func TestLinkWhileTheDataFileIsGoneSaysSo(t *testing.T) {
	storetest.EmbeddedOnly(t, "the embedded store's data file")
	t.Parallel()
	dir := t.TempDir()
	st, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	frozen := time.Now()
	r := newRigHub(t, st, Config{}, time.Now, nil, hubSetup{now: func() time.Time { return frozen }})
	token := r.pair("file-gone-1")
	if err := os.Remove(filepath.Join(dir, boltstore.FileName)); err != nil {
		t.Fatal(err)
	}
	ws, _, err := r.dial(token, nil)
	if err != nil {
		t.Fatalf("the upgrade reads the open file: %v, want the link", err)
	}
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "test", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}}})
	if code := closeCode(t, ws); code != websocket.StatusTryAgainLater {
		t.Fatalf("the hello with the data file gone: close %d, want 1013", code)
	}
	_, res, err := r.dial(token, nil)
	if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "5" {
		t.Fatalf("a link after: %v %v, want 503 with Retry-After 5", res, err)
	}
	var body struct{ Error, Message string }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Error != "unavailable" || !strings.Contains(body.Message, "data file was deleted or replaced") || strings.Contains(body.Message, "database") {
		t.Fatalf("a link after: %+v, want unavailable saying the data file is gone, not a database", body)
	}
}
