package main

import (
	"encoding/json"
	"os"
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

	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var tags string
	recipes := map[string]string{}
	var target string
	for _, line := range strings.Split(string(mk), "\n") {
		if v, ok := strings.CutPrefix(line, "TEST_TAGS ?= "); ok {
			tags = strings.TrimSpace(v)
		}
		if name, _, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "\t") && !strings.ContainsAny(name, " =$#") {
			target = name
			continue
		}
		if strings.HasPrefix(line, "\t") {
			recipes[target] += line + "\n"
		}
	}
	if tags != testbin.Tag || !strings.Contains(recipes["test-binaries"], "build -tags $(TEST_TAGS) ") {
		t.Errorf("make test-binaries builds with TEST_TAGS %q and\n%s\nwant -tags %s", tags, recipes["test-binaries"], testbin.Tag)
	}
	for _, prod := range []string{"build", "agents"} {
		if r := recipes[prod]; !strings.Contains(r, "build ") || strings.Contains(r, "-tags") || strings.Contains(r, "TEST_TAGS") || strings.Contains(r, testbin.Tag) {
			t.Errorf("make %s builds with a tag, or builds nothing:\n%s", prod, r)
		}
	}
}
