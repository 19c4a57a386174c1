// Package durable holds what makes a file's replacement survive a power
// loss, beside the fsync of the file itself.
package durable

import (
	"fmt"
	"os"
)

// SyncDir makes a rename (or a creation) in dir durable: until the
// directory itself is synced, a power loss may bring back the old name.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
