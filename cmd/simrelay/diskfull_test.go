//go:build linux

package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
)

// TestDiskFullRefusesWritesUntilRoom runs a server whose writes cannot grow
// its data file: its RLIMIT_FSIZE is lowered under the store's pages, as a
// full disk does (the write fails with EFBIG instead of ENOSPC; Go ignores
// the SIGXFSZ that comes with it). Sends answered a generic 500 internal
// and /readyz stayed ready. Each must now answer 503 unavailable saying the
// disk is full (nothing of the server's internals in the body), /readyz
// must fail, the log must say so once, not once a request; once the limit
// is lifted the server must be ready and take sends again by itself, say
// so once, and every send answered 200 must be in a store that checks
// clean after a restart.
func TestDiskFullRefusesWritesUntilRoom(t *testing.T) {
	storetest.EmbeddedOnly(t, "the embedded store's data file")
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	prefill(t, st.dir, "full-phone", 0)
	srv := startServer(t, bin, st)
	sendBody := `{"device_fingerprint":"full-phone","phone":"+15551234567","message":"hello"}`
	var taken []string
	taken = append(taken, send(t, srv.url, apiKey, "full-phone", "before"))

	// Two pages: the meta pages fit, no page of data does.
	setFileLimit(t, srv.cmd.Process.Pid, 2*4096)
	for i := range 20 {
		res, body := post(t, srv.url+"/chat/send", apiKey, sendBody)
		if res.StatusCode != 503 || !strings.Contains(string(body), `"error":"unavailable"`) || !strings.Contains(string(body), "disk is full") {
			t.Fatalf("send %d on a full disk: got %d %s, want 503 unavailable saying the disk is full", i, res.StatusCode, body)
		}
		if got := res.Header.Get("Retry-After"); got != "5" {
			t.Fatalf("send on a full disk: Retry-After %q, want 5", got)
		}
		if b := string(body); strings.Contains(b, st.dir) || strings.Contains(b, "simrelay.db") || strings.Contains(b, "file too large") {
			t.Fatalf("the 503 shows the server's internals: %s", b)
		}
	}
	for range 3 {
		if code, body := get(t, srv.url+"/readyz", ""); code != 503 {
			t.Fatalf("/readyz on a full disk: got %d %s, want 503", code, body)
		}
	}
	if code, _ := get(t, srv.url+"/company", apiKey); code != 200 {
		t.Fatalf("a read on a full disk: got %d, want 200", code)
	}
	if n := strings.Count(srv.stderr.String(), "the store's disk is full"); n != 1 {
		t.Fatalf("the log says the disk is full %d times, want once:\n%s", n, srv.stderr.String())
	}

	setFileLimit(t, srv.cmd.Process.Pid, unix.RLIM_INFINITY)
	poll.Within(t, 15*time.Second, "/readyz ready once the disk has room", func() bool {
		code, _ := get(t, srv.url+"/readyz", "")
		return code == 200
	})
	taken = append(taken, send(t, srv.url, apiKey, "full-phone", "after"))
	if n := strings.Count(srv.stderr.String(), "the store's disk has room again"); n != 1 {
		t.Fatalf("the log says the disk has room again %d times, want once:\n%s", n, srv.stderr.String())
	}

	_ = srv.cmd.Process.Kill()
	_ = srv.cmd.Wait()
	if out, err := exec.Command(bin, "admin", "check", "--data-dir", st.dir).CombinedOutput(); err != nil {
		t.Fatalf("admin check after the full disk: %v\n%s", err, out)
	}
	srv = startServer(t, bin, st)
	for _, id := range taken {
		if code, body := get(t, srv.url+"/chat/queue/"+id, apiKey); code != 200 {
			t.Fatalf("send %s answered 200 is gone after a restart: %d %s", id, code, body)
		}
	}
}

// setFileLimit sets the soft RLIMIT_FSIZE of the process pid, in bytes.
func setFileLimit(t *testing.T, pid int, limit uint64) {
	t.Helper()
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: unix.RLIM_INFINITY}, nil); err != nil {
		t.Fatalf("set the server's file size limit: %v", err)
	}
}
