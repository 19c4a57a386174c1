//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/syncbuf"
)

// A token file that is a FIFO is named as no token file at once: opening
// one to read waits for a writer, so the phone hung before its link and
// did not even stop on SIGTERM.
func TestVirtualPhoneTokenFileFIFO(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "phone.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	want := "token file " + fifo + " is not a regular file: name a file to keep the device token in"
	for _, tc := range []struct {
		args []string
		exit int
	}{
		{nil, 2}, // nothing to pair with: the file is all there is
		{[]string{"--api-key", "sk_" + strings.Repeat("a", 32)}, 1}, // could pair, but reads the file first and stops there
	} {
		code := make(chan int, 1)
		stdout, stderr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
		go func() {
			code <- run(context.Background(), append([]string{"phone", "--server", tokenServer, "--token-file", fifo}, tc.args...), stdout, stderr)
		}()
		select {
		case c := <-code:
			if c != tc.exit || !strings.Contains(stderr.String(), want) {
				t.Fatalf("%v: exit %d, stderr %q; want %d and %q", tc.args, c, stderr.String(), tc.exit, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: the phone still waits on a FIFO token file after 10 s", tc.args)
		}
		if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Fatalf("%v: the FIFO is no longer there as it was: %v %v", tc.args, fi.Mode(), err)
		}
	}
}
