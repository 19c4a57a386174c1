package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/testbin"
)

// TestTestBinaryHashesAtTheTestsCost: the simrelay the tests run (make
// test's, or the package's own build) is a test build (testbin.Tag): its
// admin create-company stores a password hash at the tests' cost, not at
// the production cost that made these hashes a dozen seconds of a core in
// make test, and its server says at its start that it is not for serving
// users. The untagged builds keep the production cost: account's
// TestPasswordCostFromConfig, and the Makefile's build and agents below.
func TestTestBinaryHashesAtTheTestsCost(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	st := newTestStore(t)
	out, err := exec.Command(bin, append([]string{"admin", "create-company", "--company", "Acme", "--email", "you@example.com", "--password", "Change-me-123"}, st.args()...)...).Output()
	if err != nil {
		t.Fatalf("create-company: %v", err)
	}
	var created struct {
		UserID uint64 `json:"userId"`
	}
	if err := json.Unmarshal(out, &created); err != nil || created.UserID == 0 {
		t.Fatalf("create-company printed %q (%v)", out, err)
	}
	if h := readUser(t, st, created.UserID).PasswordHash; !strings.HasPrefix(h, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("the test binary stored the hash %.40q..., want the tests' cost m=64,t=1", h)
	}
	srv := startServer(t, bin, st)
	if !strings.Contains(srv.stderr.String(), "level=WARN") || !strings.Contains(srv.stderr.String(), "hashes passwords at a test's cost") {
		t.Fatalf("the test build's server does not warn that it is one:\n%s", srv.stderr.String())
	}

	if b := goRuns(makeDry(t, "test-binaries"), "build"); len(b) != 1 || !strings.Contains(b[0], " -tags "+testbin.Tag+" ") {
		t.Errorf("make test-binaries runs\n%s\nwant one go build -tags %s", strings.Join(b, "\n"), testbin.Tag)
	}
	for _, prod := range []string{"build", "agents"} {
		b := goRuns(makeDry(t, prod), "build")
		if len(b) == 0 {
			t.Errorf("make %s builds nothing", prod)
		}
		for _, l := range b {
			if strings.Contains(l, "-tags") || strings.Contains(l, testbin.Tag) {
				t.Errorf("make %s builds with a tag:\n%s", prod, l)
			}
		}
	}
}
