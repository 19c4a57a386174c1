package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A server started without a profiles address of the caller's is given
// 127.0.0.1:0 and its profiles are read where it says it serves them: a
// port found free by the bench and handed over could be taken by another
// program first (a bench of three nodes once failed with "address already
// in use" in a busy test run). The fake server, a script, prints what
// simrelay serve prints and the arguments it got.
func TestServerProfilesAtTheAddressItReports(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	bin := filepath.Join(dir, "simrelay")
	script := "#!/bin/sh\necho \"$@\" > " + argsFile + "\n" +
		"echo 'simrelay devel pprof profiles on http://127.0.0.1:45678/debug/pprof/'\n" +
		"echo 'simrelay devel listening on http://127.0.0.1:45679'\n" +
		"exec sleep 60\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := startServer(context.Background(), bin, dir, "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	if srv.pprof != "127.0.0.1:45678" || srv.url != "http://127.0.0.1:45679" {
		t.Errorf("profiles at %q, API at %q; want 127.0.0.1:45678 and http://127.0.0.1:45679", srv.pprof, srv.url)
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(args), "--pprof-listen 127.0.0.1:0") {
		t.Errorf("the server's arguments %q do not let it choose its profiles' port", args)
	}
}
