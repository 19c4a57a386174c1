package boltstore

import (
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// backupAdvice ends the message of a file Verify refuses.
const backupAdvice = "take another backup (this one was cut short or damaged on its way); nothing was changed"

// Verify checks that the file at path is a whole simrelay store, as Open
// checks its own before using it (its headers and size, then every page),
// without taking it as a store: simrelay admin restore runs it on a backup
// before putting the backup in place. An empty file or another program's
// bbolt database is refused too. The file is opened read-only; nothing is
// written.
func Verify(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	empty, err := checkFile(path, backupAdvice)
	if err != nil {
		return err
	}
	if empty {
		return fmt.Errorf("%w: %s is empty (0 bytes); %s", ErrBadFile, path, backupAdvice)
	}
	db, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: DefaultOpenTimeout}, backupAdvice)
	if errors.Is(err, ErrBadFile) {
		return err
	}
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	defer db.Close()
	if err := checkPages(db, path, backupAdvice); err != nil {
		return err
	}
	return db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			return fmt.Errorf("%w: %s is a bbolt database without simrelay's schema; %s", ErrBadFile, path, backupAdvice)
		}
		return nil
	})
}
