package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestLogLinesShowDirectionControls pins the log side of docs/security.md's
// "Text direction": in the text format (the default) a name holding a
// right-to-left override is written with the override spelled out as \u202e,
// so it cannot turn the rest of an operator's terminal line around, and
// right-to-left letters stay readable; the JSON format carries the string
// exactly as it came, for the programs that read it.
func TestLogLinesShowDirectionControls(t *testing.T) {
	var text bytes.Buffer
	newLogger(&text, "text", slog.LevelInfo).Info("device renamed", "name", "Evil\u202e 1", "carrier", "هاتف")
	line := text.String()
	if strings.ContainsRune(line, '\u202e') || !strings.Contains(line, `name="Evil\u202e 1"`) || !strings.Contains(line, "carrier=هاتف") {
		t.Errorf("text log line: %q", line)
	}

	var js bytes.Buffer
	newLogger(&js, "json", slog.LevelInfo).Info("device renamed", "name", "Evil\u202e 1")
	var rec struct{ Name string }
	if err := json.Unmarshal(js.Bytes(), &rec); err != nil || rec.Name != "Evil\u202e 1" {
		t.Errorf("JSON log line %q: name %q, %v", js.String(), rec.Name, err)
	}
}
