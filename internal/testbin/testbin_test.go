package testbin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrebuilt(t *testing.T) {
	t.Setenv(Env, "")
	if path, ok, err := Prebuilt("simrelay"); path != "" || ok || err != nil {
		t.Fatalf("unset: got %q %v %v, want the caller to build its own", path, ok, err)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "simrelay")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, dir)
	if path, ok, err := Prebuilt("simrelay"); path != bin || !ok || err != nil {
		t.Fatalf("set: got %q %v %v, want %s", path, ok, err, bin)
	}
	for _, c := range []struct{ env, name, want string }{
		{dir, "simrelay-agent", "has no simrelay-agent"},
		{dir, "notes", "not an executable file"},
		{"bin/test", "simrelay", "want an absolute path"},
	} {
		t.Setenv(Env, c.env)
		path, ok, err := Prebuilt(c.name)
		if path != "" || !ok || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s, %s: got %q %v %v, want an error saying %q", Env, c.env, c.name, path, ok, err, c.want)
		}
	}
}

// BuildFlags names Tag, and a test that changes the flags it got (appends
// in place, or sets one) changes no other test's build.
func TestBuildFlagsAreEachCallersOwn(t *testing.T) {
	t.Parallel()
	mine := BuildFlags()
	if len(mine) != 2 || mine[0] != "-tags" || mine[1] != Tag {
		t.Fatalf("BuildFlags: %q, want -tags %s", mine, Tag)
	}
	mine[1] = "other"
	_ = append(mine[:1], "-race")
	if again := BuildFlags(); len(again) != 2 || again[0] != "-tags" || again[1] != Tag {
		t.Fatalf("BuildFlags after a caller changed its own: %q, want -tags %s", again, Tag)
	}
}
