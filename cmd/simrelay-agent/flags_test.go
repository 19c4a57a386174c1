package main

import (
	"bytes"
	"strings"
	"testing"
)

// A modem's --number the server would refuse in every hello (PROTOCOL.md
// 7.1 rule 4) is refused at start, as --sims numbers are.
func TestModemNumberMustBeE164(t *testing.T) {
	var errOut bytes.Buffer
	code := run(t.Context(), []string{"run", "--transport", "modem", "--number", "0555 123 4567", "--config", t.TempDir() + "/agent.json"}, &bytes.Buffer{}, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "--number") || !strings.Contains(errOut.String(), "E.164") {
		t.Fatalf("exit %d, output %q; want 1 naming --number and E.164", code, errOut.String())
	}
}
