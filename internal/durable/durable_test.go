package durable

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSyncDir(t *testing.T) {
	t.Parallel()
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatalf("a directory: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "gone")
	if err := SyncDir(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("a missing directory: got %v, want an error naming it", err)
	}
}
