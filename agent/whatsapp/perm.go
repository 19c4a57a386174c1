package whatsapp

import (
	"fmt"
	"os"
)

// chmodPrivate makes the session file (and its WAL companions, when they
// exist) readable by its owner only.
func chmodPrivate(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("whatsapp session %s: %w", p, err)
		}
	}
	return nil
}
