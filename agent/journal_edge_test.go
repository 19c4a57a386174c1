package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second agent on the same journal, and a journal file that is not one,
// get errors that say what is wrong and what to do.
func TestJournalOpenErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.journal.db")
	j, err := OpenJournal(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := OpenJournal(path, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "in use by another simrelay-agent") {
		t.Fatalf("second open: got %v, want the journal in use", err)
	}

	bad := filepath.Join(t.TempDir(), "agent.journal.db")
	if err := os.WriteFile(bad, []byte(strings.Repeat("not a journal\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = OpenJournal(bad, time.Second)
	if err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("damaged journal: got %v, want an error naming the file as damaged", err)
	}
}
