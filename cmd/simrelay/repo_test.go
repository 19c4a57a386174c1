package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedSize is the largest file the repository may track: the biggest
// legitimate one (the OpenAPI document) is a few hundred KB, while a built
// simrelay is ~30 MB.
const maxTrackedSize = 1 << 20

// executableMagic are the first bytes of the executables Go builds here and
// by `make agents` (ELF, Mach-O 64-bit both byte orders, universal binaries,
// PE).
var executableMagic = [][]byte{
	[]byte("\x7fELF"),
	{0xcf, 0xfa, 0xed, 0xfe},
	{0xfe, 0xed, 0xfa, 0xcf},
	{0xca, 0xfe, 0xba, 0xbe},
	[]byte("MZ"),
}

// TestRepositoryTracksNoBuiltFiles keeps built binaries and other bulk out
// of git: CI runs it on every submission, on a fresh clone.
func TestRepositoryTracksNoBuiltFiles(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout (a source archive): nothing is tracked")
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		if reason := builtOrBulky(filepath.Join(root, name)); reason != "" {
			t.Errorf("%s is tracked but %s: build it, do not commit it (add it to .gitignore)", name, reason)
		}
	}
}

// builtOrBulky says why a file does not belong in the repository, or "".
func builtOrBulky(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "" // deleted in the work tree but not yet in the index
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return ""
	}
	if info.Size() > maxTrackedSize {
		return "larger than 1 MiB"
	}
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	for _, magic := range executableMagic {
		if n >= len(magic) && bytes.Equal(head[:len(magic)], magic) {
			return "an executable"
		}
	}
	return ""
}

func TestBuiltOrBulkyFindsExecutables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want string
	}{
		{self, "larger than 1 MiB"},
		{write("elf", []byte("\x7fELF\x02\x01\x01")), "an executable"},
		{write("macho", []byte{0xcf, 0xfa, 0xed, 0xfe, 7}), "an executable"},
		{write("notes.md", []byte("# MZ is a fine heading, but not first\n")), ""},
		{write("big.json", bytes.Repeat([]byte(" "), maxTrackedSize+1)), "larger than 1 MiB"},
	} {
		if got := builtOrBulky(tc.path); got != tc.want {
			t.Errorf("builtOrBulky(%s) = %q, want %q", filepath.Base(tc.path), got, tc.want)
		}
	}
}
