package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryFlagIsDocumented: each command the usage lists, and each flag
// a command's -h lists, is named in README.md or docs/*.md, so an operator
// who reads the docs meets every setting the binary takes (the help's one
// line each says what a flag is, the docs when and why to set it).
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
	_, _, usage := runCmd(t)
	commands := regexp.MustCompile(`(?m)^  (simrelay (?:admin )?[a-z-]+)`).FindAllStringSubmatch(usage, -1)
	if len(commands) < 10 {
		t.Fatalf("the usage lists %d commands: %q", len(commands), usage)
	}
	for _, c := range commands {
		if !regexp.MustCompile(regexp.QuoteMeta(c[1]) + `($|[^a-z0-9-])`).MatchString(text) {
			t.Errorf("the usage lists %q, which neither README.md nor docs/*.md names", c[1])
		}
	}
	flagRE := regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	// Every command the usage lists (but version, which takes none), and
	// admin's own help: a command added to the usage is checked too.
	helps := [][]string{{"admin", "-h"}}
	for _, c := range commands {
		if args := strings.Fields(c[1])[1:]; !slices.Equal(args, []string{"version"}) {
			helps = append(helps, append(args, "-h"))
		}
	}
	for _, cmd := range helps {
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

// TestOperationsNamesThePostgreSQLSuites: the command docs/operations.md
// gives for the second pass of make test runs every package that make
// test's second pass runs (./cmd/... covering those under cmd/).
func TestOperationsNamesThePostgreSQLSuites(t *testing.T) {
	t.Parallel()
	suites := pgSuites(t)
	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for line := range strings.Lines(string(ops)) {
		if v, ok := strings.CutPrefix(line, "SIMRELAY_TEST_STORE=postgres go test ./"); ok {
			documented = strings.Fields("./" + v)
			break
		}
	}
	if len(suites) == 0 || len(documented) == 0 {
		t.Fatalf("PG_SUITES %q, docs/operations.md's command %q: one is missing", suites, documented)
	}
	for _, pkg := range suites {
		if strings.HasPrefix(pkg, "./cmd/") && slices.Contains(documented, "./cmd/...") {
			continue
		}
		if !slices.Contains(documented, pkg) {
			t.Errorf("docs/operations.md's PostgreSQL pass leaves out %s, which make test's runs", pkg)
		}
	}
}
