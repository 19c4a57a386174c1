package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryFlagIsDocumented: each flag a command's -h lists is named in
// README.md or docs/*.md, so an operator who reads the docs meets every
// setting the binary takes (the help's one line each says what a flag is,
// the docs when and why to set it).
func TestEveryFlagIsDocumented(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var docs strings.Builder
	for _, f := range append(files, "../../README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
		docs.WriteByte('\n')
	}
	text := docs.String()
	flagRE := regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	for _, cmd := range [][]string{
		{"serve", "-h"}, {"phone", "-h"}, {"bench", "-h"}, {"admin", "-h"},
		{"admin", "create-company", "-h"}, {"admin", "mail", "-h"}, {"admin", "backup", "-h"},
		{"admin", "restore", "-h"}, {"admin", "check", "-h"}, {"admin", "set-plan", "-h"},
		{"admin", "delete-device", "-h"}, {"admin", "copy-store", "-h"}, {"admin", "rotate-keys", "-h"},
	} {
		_, out, errOut := runCmd(t, cmd...)
		help := out + errOut
		flags := flagRE.FindAllString(help, -1)
		if len(flags) == 0 {
			t.Errorf("simrelay %s: no flag in %q", strings.Join(cmd, " "), help)
		}
		for _, f := range flags {
			if !regexp.MustCompile(regexp.QuoteMeta(f) + `($|[^a-z0-9-])`).MatchString(text) {
				t.Errorf("simrelay %s lists %s, which neither README.md nor docs/*.md names", strings.Join(cmd[:len(cmd)-1], " "), f)
			}
		}
	}
}
