package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestEveryCommandAndFlagIsDocumented: each command the usage lists, and
// each flag a command's -h lists, is named in docs/agents.md or the
// README, so the set-up page covers everything the binary takes.
func TestEveryCommandAndFlagIsDocumented(t *testing.T) {
	t.Parallel()
	var docs strings.Builder
	for _, f := range []string{"../../docs/agents.md", "../../README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	text := docs.String()
	named := func(s string) bool {
		return regexp.MustCompile(regexp.QuoteMeta(s) + `($|[^a-z0-9-])`).MatchString(text)
	}
	help := func(args ...string) string {
		var out, errOut bytes.Buffer
		run(t.Context(), args, &out, &errOut)
		return out.String() + errOut.String()
	}
	commands := regexp.MustCompile(`(?m)^  (simrelay-agent [a-z]+(?: [a-z]+)?)`).FindAllStringSubmatch(help("-h"), -1)
	if len(commands) < 4 {
		t.Fatalf("the usage lists %d commands: %q", len(commands), commands)
	}
	for _, c := range commands {
		if !named(c[1]) {
			t.Errorf("the usage lists %q, which neither docs/agents.md nor the README names", c[1])
		}
	}
	flagRE := regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	for _, cmd := range [][]string{{"pair", "-h"}, {"run", "-h"}, {"whatsapp", "link", "-h"}} {
		flags := flagRE.FindAllString(help(cmd...), -1)
		if len(flags) == 0 {
			t.Errorf("simrelay-agent %s -h lists no flag", strings.Join(cmd[:len(cmd)-1], " "))
		}
		for _, f := range flags {
			if !named(f) {
				t.Errorf("simrelay-agent %s lists %s, which neither docs/agents.md nor the README names", strings.Join(cmd[:len(cmd)-1], " "), f)
			}
		}
	}
}
