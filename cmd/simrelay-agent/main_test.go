package main

import (
	"bytes"
	"strings"
	"testing"
)

// Asking a command for help is not a mistake: its flags and their
// environment twins are printed and the exit status is 0; an unknown flag
// is 2.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"pair", "-h"}, {"run", "--help"}, {"whatsapp", "link", "-h"}} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), args, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "SIMRELAY_AGENT_CONFIG") || !strings.Contains(errOut.String(), "-config") {
			t.Errorf("%v: exit %d, output %q; want 0 with the flags and their twins", args, code, errOut.String())
		}
	}
	if code := run(t.Context(), []string{"pair", "--no-such-flag"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Errorf("an unknown flag: exit %d, want 2", code)
	}
}
