package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Buckets of the web console's sessions. The cookie holds a random id; the
// store keeps only its hash, so a copy of the store signs nobody in.
var (
	bucketConsoleSessions = []byte("console_sessions")      // sha256(id) -> ConsoleSession
	bucketUserConsoleSess = []byte("user_console_sessions") // user id + sha256(id) -> nil
	consoleBuckets        = [][]byte{bucketConsoleSessions, bucketUserConsoleSess}
)

// PutConsoleSession stores a new session under the hash of its id; a
// user who is not stored (a company removed since) is ErrNotFound.
func (s *Store) PutConsoleSession(hash []byte, sess ConsoleSession) error {
	err := s.update(func(tx *bolt.Tx) error {
		if err := userStored(tx, sess.UserID); err != nil {
			return err
		}
		if err := tx.Bucket(bucketUserConsoleSess).Put(append(itob(sess.UserID), hash...), nil); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketConsoleSessions), hash, sess)
	})
	if err != nil {
		return fmt.Errorf("store: put console session: %w", err)
	}
	return nil
}

// ConsoleSession returns a session by the hash of its id (ErrNotFound when
// absent or revoked).
func (s *Store) ConsoleSession(hash []byte) (ConsoleSession, error) {
	var sess ConsoleSession
	err := s.view(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bucketConsoleSessions), hash, &sess) })
	if err != nil {
		return sess, fmt.Errorf("store: console session: %w", err)
	}
	return sess, nil
}

// TouchConsoleSession moves a session's last activity to at; one seen
// after at keeps its later time (two requests' touches may come in either
// order).
func (s *Store) TouchConsoleSession(hash []byte, at time.Time) error {
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketConsoleSessions)
		var sess ConsoleSession
		if err := getJSON(b, hash, &sess); err != nil {
			return err
		}
		if !sess.SeenAt.Before(at) {
			return nil
		}
		sess.SeenAt = at
		return putJSON(b, hash, sess)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("store: touch console session: %w", err)
	}
	return nil
}

// DeleteConsoleSession signs one browser out.
func (s *Store) DeleteConsoleSession(hash []byte) error {
	err := s.update(func(tx *bolt.Tx) error { return deleteConsoleSession(tx, hash) })
	if err != nil {
		return fmt.Errorf("store: delete console session: %w", err)
	}
	return nil
}

func deleteConsoleSession(tx *bolt.Tx, hash []byte) error {
	b := tx.Bucket(bucketConsoleSessions)
	var sess ConsoleSession
	if err := getJSON(b, hash, &sess); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	if err := tx.Bucket(bucketUserConsoleSess).Delete(append(itob(sess.UserID), hash...)); err != nil {
		return err
	}
	return b.Delete(hash)
}

// revokeConsoleSessions signs every browser of a user out: a password reset,
// a removal and "sign out everywhere" all end the console's sessions too.
func revokeConsoleSessions(tx *bolt.Tx, userID uint64) error {
	prefix := itob(userID)
	var hashes [][]byte
	c := tx.Bucket(bucketUserConsoleSess).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		hashes = append(hashes, bytes.Clone(k[8:]))
	}
	for _, h := range hashes {
		if err := deleteConsoleSession(tx, h); err != nil {
			return err
		}
	}
	return nil
}

// PruneConsoleSessions deletes sessions idle since before idleCutoff or past
// their absolute end at now, and returns how many it removed.
func (s *Store) PruneConsoleSessions(idleCutoff, now time.Time) (int, error) {
	var dead [][]byte
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketConsoleSessions).ForEach(func(k, v []byte) error {
			var sess ConsoleSession
			if err := jsonUnmarshal(v, &sess); err != nil {
				return err
			}
			if sess.SeenAt.Before(idleCutoff) || !now.Before(sess.ExpiresAt) {
				dead = append(dead, bytes.Clone(k))
			}
			return nil
		})
	})
	if err == nil && len(dead) > 0 {
		err = s.update(func(tx *bolt.Tx) error {
			for _, h := range dead {
				if err := deleteConsoleSession(tx, h); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return 0, fmt.Errorf("store: prune console sessions: %w", err)
	}
	return len(dead), nil
}
