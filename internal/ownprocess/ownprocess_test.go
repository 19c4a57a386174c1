package ownprocess

import (
	"os"
	"strconv"
	"testing"
)

// The test's body runs in another process than the one that started it,
// and only there.
func TestBodyRunsInAProcessOfItsOwn(t *testing.T) {
	t.Parallel()
	parent := os.Getenv("OWNPROCESS_PARENT")
	if !Run(t) {
		return
	}
	if parent == "" || parent == strconv.Itoa(os.Getpid()) {
		t.Fatalf("the body runs in process %d, its parent named %q", os.Getpid(), parent)
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(env) == "" {
		os.Setenv("OWNPROCESS_PARENT", strconv.Itoa(os.Getpid()))
	}
	os.Exit(m.Run())
}
