package boltstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/simrelay/simrelay/store"
)

// Media are the files (images, audio, video, documents) that came with a
// WhatsApp or iMessage message an agent received. The agent uploads each
// one (media.Service) before it sends the inbound frame that names it; the
// message takes it when it is stored (attachMedia).
//
// The bytes live in this store, in chunks, not in files beside it: so a
// backup (`simrelay admin backup`, a bbolt snapshot) holds them with the
// messages that name them, a crash never leaves a file without its record
// or a record without its file, and the PostgreSQL backend can keep them
// the same way (a table of chunks). A chunk is small enough that reading one
// holds a read transaction only briefly.

// mediaRowCost is a media record, its key and index entries, counted on top
// of the file's bytes against the storage budget.
const mediaRowCost = store.MediaRecordCost

var (
	bucketMedia         = []byte("media")         // media id -> Media
	bucketMediaChunks   = []byte("media_chunks")  // media id + 0 + chunk number -> bytes
	bucketMediaKeys     = []byte("media_keys")    // company id + device id + upload key -> media id
	bucketMediaOrphans  = []byte("media_orphans") // created_at + media id -> nil, until a message takes it
	mediaBuckets        = [][]byte{bucketMedia, bucketMediaChunks, bucketMediaKeys, bucketMediaOrphans}
	errMediaAlreadyUsed = errors.New("store: the media belongs to another message")
)

func mediaChunkKey(id string, n uint32) []byte {
	k := append([]byte(id), 0, 0, 0, 0, 0)
	k[len(id)+1], k[len(id)+2], k[len(id)+3], k[len(id)+4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return k
}

// MediaByKey returns the upload the device made under key (ErrNotFound
// when none).
func (s *Store) MediaByKey(companyID, deviceID uint64, key string) (Media, error) {
	var out Media
	err := s.view(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketMediaKeys).Get(devKey(companyID, deviceID, []byte(key)))
		if id == nil {
			return ErrNotFound
		}
		return getJSON(tx.Bucket(bucketMedia), id, &out)
	})
	if err != nil {
		return Media{}, fmt.Errorf("store: media %q of device %d: %w", key, deviceID, err)
	}
	return out, nil
}

// PutMedia stores a file of m.Size bytes read from src (a spooled upload,
// so that no network read happens inside the write transaction), in one
// transaction with its record, charged to the company's storage budget.
// m carries ID, CompanyID, DeviceID, Key, ContentType, Filename and Size.
// A device deleted meanwhile, or whose company is closing
// (MarkCompanyClosing) or not stored, is ErrDeviceGone, read first in this
// transaction: an upload whose token the server checked again just
// before a mark stores nothing after it, and a repeated Key of such a
// device is refused too. Else a repeated Key answers the upload made
// first (and reads nothing).
func (s *Store) PutMedia(m Media, src io.Reader, now time.Time) (Media, bool, error) {
	var out Media
	var dup bool
	var refused error
	err := s.update(func(tx *bolt.Tx) error {
		if _, err := liveDeviceRefOfOpenCompany(tx, m.CompanyID, m.DeviceID); errors.Is(err, ErrDeviceGone) {
			refused = err
			return nil
		} else if err != nil {
			return err
		}
		kk := devKey(m.CompanyID, m.DeviceID, []byte(m.Key))
		if id := tx.Bucket(bucketMediaKeys).Get(kk); id != nil {
			dup = true
			return getJSON(tx.Bucket(bucketMedia), id, &out)
		}
		if err := s.charge(tx, m.CompanyID, now, m.Size+mediaRowCost); err != nil {
			if errors.As(err, new(*BudgetError)) {
				refused = err
				return nil
			}
			return err
		}
		h := sha256.New()
		chunks := tx.Bucket(bucketMediaChunks)
		buf := make([]byte, MediaChunkSize)
		var total int64
		for n := uint32(0); ; n++ {
			k, err := io.ReadFull(src, buf)
			if k > 0 {
				h.Write(buf[:k])
				total += int64(k)
				// bbolt keeps the slice until the commit: a copy per chunk.
				if err := chunks.Put(mediaChunkKey(m.ID, n), bytes.Clone(buf[:k])); err != nil {
					return err
				}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("read upload: %w", err)
			}
		}
		if total != m.Size {
			return fmt.Errorf("upload has %d bytes, want %d", total, m.Size)
		}
		m.SHA256 = hex.EncodeToString(h.Sum(nil))
		m.CreatedAt, m.MessageID = now.UTC(), 0
		if err := putJSON(tx.Bucket(bucketMedia), []byte(m.ID), m); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMediaKeys).Put(kk, []byte(m.ID)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMediaOrphans).Put(append(timeKey(m.CreatedAt), m.ID...), nil); err != nil {
			return err
		}
		out = m
		return nil
	})
	if err == nil {
		err = refused
	}
	if err != nil {
		return Media{}, false, fmt.Errorf("store: put media %q: %w", m.Key, err)
	}
	return out, dup, nil
}

// MediaByID returns a file's record within the company: another company's
// file is ErrNotFound, as is one no message took yet (it is nobody's to
// see until its message is stored). companyID 0 skips the company check,
// for a URL whose signature already names the file.
func (s *Store) MediaByID(companyID uint64, id string) (Media, error) {
	var out Media
	err := s.view(func(tx *bolt.Tx) error {
		if err := getJSON(tx.Bucket(bucketMedia), []byte(id), &out); err != nil {
			return err
		}
		if (companyID != 0 && out.CompanyID != companyID) || out.MessageID == 0 {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return Media{}, fmt.Errorf("store: media %q: %w", id, err)
	}
	return out, nil
}

// CopyMedia writes n bytes of the file from byte off (n < 0: to its end)
// to w, one chunk per short read transaction, so a slow reader never holds
// the store.
func (s *Store) CopyMedia(w io.Writer, id string, off, n int64) (int64, error) {
	return store.CopyMediaChunks(w, off, n, func(i uint32) ([]byte, bool, error) {
		var chunk []byte
		err := s.view(func(tx *bolt.Tx) error {
			if v := tx.Bucket(bucketMediaChunks).Get(mediaChunkKey(id, i)); v != nil {
				chunk = bytes.Clone(v)
			}
			return nil
		})
		if err != nil {
			return nil, false, fmt.Errorf("store: read media %q: %w", id, err)
		}
		return chunk, chunk != nil, nil
	})
}

// attachMedia gives a new inbound message the files it names (m.Media
// holds their ids only): each must be an upload of the message's device
// registration that no message took yet. It fills in the refs.
func attachMedia(tx *bolt.Tx, m *Message) error {
	b := tx.Bucket(bucketMedia)
	for i, ref := range m.Media {
		var md Media
		if err := getJSON(b, []byte(ref.ID), &md); err != nil {
			if errors.Is(err, ErrNotFound) {
				return fmt.Errorf("%w: media[%d] %q", ErrMediaUnknown, i, ref.ID)
			}
			return err
		}
		if md.CompanyID != m.CompanyID || md.DeviceID != m.DeviceID {
			return fmt.Errorf("%w: media[%d] %q", ErrMediaUnknown, i, ref.ID)
		}
		if md.MessageID != 0 && md.MessageID != m.ID {
			return fmt.Errorf("%w: media[%d] %q", errMediaAlreadyUsed, i, ref.ID)
		}
		if err := tx.Bucket(bucketMediaOrphans).Delete(append(timeKey(md.CreatedAt), md.ID...)); err != nil {
			return err
		}
		md.MessageID = m.ID
		if err := putJSON(b, []byte(md.ID), md); err != nil {
			return err
		}
		m.Media[i] = md.Ref()
	}
	return nil
}

// checkMedia is attachMedia's read-only half: it refuses, before anything is
// written, a message naming files it may not take.
func checkMedia(tx *bolt.Tx, m Message) error {
	b := tx.Bucket(bucketMedia)
	for i, ref := range m.Media {
		var md Media
		if err := getJSON(b, []byte(ref.ID), &md); err != nil {
			if errors.Is(err, ErrNotFound) {
				return fmt.Errorf("%w: media[%d] %q", ErrMediaUnknown, i, ref.ID)
			}
			return err
		}
		if md.CompanyID != m.CompanyID || md.DeviceID != m.DeviceID || md.MessageID != 0 {
			return fmt.Errorf("%w: media[%d] %q", ErrMediaUnknown, i, ref.ID)
		}
	}
	return nil
}

// deleteMedia removes a file: its record, chunks, key and index entries.
func deleteMedia(tx *bolt.Tx, md Media) error {
	c := tx.Bucket(bucketMediaChunks).Cursor()
	prefix := append([]byte(md.ID), 0)
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	if err := tx.Bucket(bucketMediaOrphans).Delete(append(timeKey(md.CreatedAt), md.ID...)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketMediaKeys).Delete(devKey(md.CompanyID, md.DeviceID, []byte(md.Key))); err != nil {
		return err
	}
	return tx.Bucket(bucketMedia).Delete([]byte(md.ID))
}

// PruneMedia deletes the uploads no message took that were made before
// cutoff, at most limit per call (a transaction stays short), and returns
// how many.
func (s *Store) PruneMedia(cutoff time.Time, limit int) (int, error) {
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		n = 0
		end := timeKey(cutoff)
		c := tx.Bucket(bucketMediaOrphans).Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k[:8], end) < 0 && n < limit; k, _ = c.First() {
			var md Media
			err := getJSON(tx.Bucket(bucketMedia), k[8:], &md)
			if errors.Is(err, ErrNotFound) {
				if err := c.Delete(); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			if err := deleteMedia(tx, md); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune media: %w", err)
	}
	return n, nil
}
