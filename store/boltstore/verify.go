package boltstore

import (
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// backupAdvice ends the message of a file Verify refuses.
const backupAdvice = "take another backup (this one was cut short or damaged on its way); nothing was changed"

// Verify checks that the file at path is a whole simrelay store (its
// headers and size, as Open checks them, then every page: checkPages)
// without taking it as a store: simrelay admin restore runs it on a backup
// before putting the backup in place. An empty file or another program's
// bbolt database is refused too. The file is opened read-only; nothing is
// written.
func Verify(path string) error { return verify(path, backupAdvice) }

// Check is Verify for a data file in place (simrelay admin check): a store
// it refuses is to be restored from a backup, as a start says of one it
// refuses. A server holding the file makes it wait for the lock
// (DefaultOpenTimeout) and fail.
func Check(path string) error { return verify(path, badFileAdvice) }

func verify(path, advice string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	empty, err := checkFile(path, advice)
	if err != nil {
		return err
	}
	if empty {
		return fmt.Errorf("%w: %s is empty (0 bytes); %s", ErrBadFile, path, advice)
	}
	db, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: DefaultOpenTimeout}, advice)
	if errors.Is(err, ErrBadFile) {
		return err
	}
	if errors.Is(err, bolterrors.ErrTimeout) {
		return fmt.Errorf("%w: %s is locked (is a simrelay server running on it? stop it first)", ErrLocked, path)
	}
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	defer db.Close()
	if err := checkPages(db, path, advice); err != nil {
		return err
	}
	return db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			return fmt.Errorf("%w: %s is a bbolt database without simrelay's schema; %s", ErrBadFile, path, advice)
		}
		return nil
	})
}
