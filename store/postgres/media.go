package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simrelay/simrelay/store"
)

// Media: a file's record is a row of media, keyed by its id and unique by
// (company, device, upload key); its bytes are rows of media_chunks of
// store.MediaChunkSize each, deleted with the record. As on bbolt the bytes
// live in the store, so a backup (pg_dump) holds them with the messages
// that name them.
//
// Where this differs from bbolt, and why: PutMedia holds no lock another
// writer waits on while it writes the bytes. It checks the device and the
// budget before reading the upload (to refuse early), then, once the bytes
// are in, charges the budget and locks the device's row until the commit,
// so a device deleted during the upload still refuses it. Uploads of one
// key at once wait on the key's unique index: the later answers the first.
// A transaction the database asks to run again reads the upload again from
// where it began when src is an io.Seeker (a spooled file); any other src
// fails such a retry.

// mediaRowCost is a media record, its key and index entries, counted on
// top of the file's bytes against the storage budget (as on bbolt).
const mediaRowCost = store.MediaRecordCost

// errUploadChanged is a retry that cannot read its upload again.
var errUploadChanged = errors.New("the upload cannot be read again for a retry")

// MediaByKey returns the upload the device made under key (ErrNotFound
// when none).
func (s *Store) MediaByKey(companyID, deviceID uint64, key string) (store.Media, error) {
	var out store.Media
	err := s.read(fmt.Sprintf("media %q of device %d", key, deviceID), func(t *txn) error {
		return getRec(t, &out, "SELECT rec FROM media WHERE company_id = $1 AND device_id = $2 AND key = $3", id(companyID), id(deviceID), key)
	})
	if err != nil {
		return store.Media{}, err
	}
	return out, nil
}

// PutMedia stores a file of m.Size bytes read from src (a spooled upload,
// so that no network read happens inside the transaction), in one
// transaction with its record, charged to the company's storage budget.
// m carries ID, CompanyID, DeviceID, Key, ContentType, Filename and Size.
// A device that is not the company's live one, or whose company is
// closing (MarkCompanyClosing) or not stored, is ErrDeviceGone, read
// first, under the company's row lock (deviceOfOpenCompanySQL): an upload
// whose token the server checked again (Recheck) just before a mark
// stores nothing after it, and a repeated Key of such a device is refused
// too. Else a repeated Key answers the upload made first (and reads
// nothing), also when both are made at once.
func (s *Store) PutMedia(m store.Media, src io.Reader, now time.Time) (store.Media, bool, error) {
	var out store.Media
	var dup bool
	start := int64(-1)
	if sk, ok := src.(io.Seeker); ok {
		if pos, err := sk.Seek(0, io.SeekCurrent); err == nil {
			start = pos
		}
	}
	read := false // the upload was read from (by an earlier try)
	err := s.write(fmt.Sprintf("put media %q", m.Key), func(t *txn) error {
		out, dup = store.Media{}, false
		// The device first, as the embedded store reads it: a repeated key
		// of a device deleted or of a closing company is refused, as a
		// repeat of an inbound message stored before is (StoreInbound).
		var dev []byte
		if err := t.row(deviceOfOpenCompanySQL, id(m.CompanyID), id(m.DeviceID)).Scan(&dev); errors.Is(err, pgx.ErrNoRows) {
			return store.ErrDeviceGone
		} else if err != nil {
			return mapErr(err)
		}
		err := getRec(t, &out, "SELECT rec FROM media WHERE company_id = $1 AND device_id = $2 AND key = $3", id(m.CompanyID), id(m.DeviceID), m.Key)
		if err == nil {
			dup = true
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if read {
			if start < 0 {
				return errUploadChanged
			}
			if _, err := src.(io.Seeker).Seek(start, io.SeekStart); err != nil {
				return err
			}
		}
		put := m
		put.CreatedAt, put.MessageID, put.SHA256 = now.UTC(), 0, ""
		raw, err := rec(put)
		if err != nil {
			return err
		}
		// An upload of the key made at once waits here for this one's end.
		tag, err := t.exec(`INSERT INTO media (id, company_id, device_id, key, created_at, rec) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (company_id, device_id, key) DO NOTHING`, put.ID, id(put.CompanyID), id(put.DeviceID), put.Key, put.CreatedAt, raw)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			dup = true
			return getRec(t, &out, "SELECT rec FROM media WHERE company_id = $1 AND device_id = $2 AND key = $3", id(m.CompanyID), id(m.DeviceID), m.Key)
		}
		// Refuse before reading what the budget will not take; the charge
		// itself comes after the bytes, so that its counter's row is not
		// held while they are written.
		if err := s.budgetRoom(t, m.CompanyID, now, m.Size+mediaRowCost); err != nil {
			return err
		}
		h := sha256.New()
		buf := make([]byte, store.MediaChunkSize)
		var total int64
		eof := false
		n := int32(0)
		_, err = t.copyFrom(pgx.Identifier{"media_chunks"}, []string{"media_id", "n", "data"}, pgx.CopyFromFunc(func() ([]any, error) {
			if eof {
				return nil, nil
			}
			read = true
			k, err := io.ReadFull(src, buf)
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				eof = true
			} else if err != nil {
				return nil, fmt.Errorf("read upload: %w", err)
			}
			if k == 0 {
				return nil, nil
			}
			h.Write(buf[:k])
			total += int64(k)
			n++
			return []any{put.ID, n - 1, buf[:k]}, nil // encoded before the next call
		}))
		if err != nil {
			return err
		}
		if total != m.Size {
			return fmt.Errorf("upload has %d bytes, want %d", total, m.Size)
		}
		put.SHA256 = hex.EncodeToString(h.Sum(nil))
		if raw, err = rec(put); err != nil {
			return err
		}
		if _, err := t.exec("UPDATE media SET rec = $2 WHERE id = $1", put.ID, raw); err != nil {
			return err
		}
		if err := s.charge(t, m.CompanyID, now, m.Size+mediaRowCost); err != nil {
			return err
		}
		// Again, now locking the device's row until the commit: a delete
		// made during the upload refuses it.
		if _, err := liveDeviceByID(t, m.CompanyID, m.DeviceID, true); err != nil {
			return err
		}
		out = put
		return nil
	})
	if err != nil {
		return store.Media{}, false, err
	}
	return out, dup, nil
}

// budgetRoom refuses, as charge would, a cost the company's day can no
// longer take, writing nothing.
func (s *Store) budgetRoom(t *txn, companyID uint64, now time.Time, cost int64) error {
	if s.dailyBudget <= 0 {
		return nil
	}
	var used int64
	if err := t.row("SELECT coalesce(sum(used), 0) FROM storage_usage WHERE company_id = $1 AND day = $2", id(companyID), day(now)).Scan(&used); err != nil {
		return err
	}
	used += t.charges[chargeKey{companyID, day(now)}] // charged by this transaction, not written yet
	if used+cost > s.dailyBudget {
		return &store.BudgetError{CompanyID: companyID, Limit: s.dailyBudget, Used: used, Cost: cost, Reset: store.NextDay(now)}
	}
	return nil
}

// MediaByID returns a file's record within the company: another company's
// file is ErrNotFound, as is one no message took yet (it is nobody's to
// see until its message is stored). companyID 0 skips the company check,
// for a URL whose signature already names the file.
func (s *Store) MediaByID(companyID uint64, mediaID string) (store.Media, error) {
	var out store.Media
	err := s.read(fmt.Sprintf("media %q", mediaID), func(t *txn) error {
		return getRec(t, &out, "SELECT rec FROM media WHERE id = $1 AND ($2 = 0 OR company_id = $2) AND message_id IS NOT NULL", mediaID, id(companyID))
	})
	if err != nil {
		return store.Media{}, err
	}
	return out, nil
}

// CopyMedia writes n bytes of the file from byte off (n < 0: to its end)
// to w, one chunk per statement, so a slow reader never holds a
// transaction open. An unknown file writes nothing.
func (s *Store) CopyMedia(w io.Writer, mediaID string, off, n int64) (int64, error) {
	return store.CopyMediaChunks(w, off, n, func(i uint32) ([]byte, bool, error) {
		var chunk []byte
		ctx, cancel := s.bounded()
		defer cancel()
		err := s.pool.QueryRow(ctx, "SELECT data FROM media_chunks WHERE media_id = $1 AND n = $2", mediaID, int32(i)).Scan(&chunk)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("store: read media %q: %w", mediaID, s.closed(err))
		}
		return chunk, true, nil
	})
}

// lockMedia reads and locks the files a new inbound message names
// (m.Media holds their ids only), in the message's transaction: each must
// be an upload of the message's device registration that no message took
// yet (store.ErrMediaUnknown otherwise, which fails the transaction).
// attachMedia gives them to the message once it has its id: the id is
// taken only when nothing refuses the message, so that a refused one takes
// none.
func lockMedia(t *txn, m *store.Message) ([]store.Media, error) {
	files := make([]store.Media, len(m.Media))
	for i, ref := range m.Media {
		err := getRec(t, &files[i], `SELECT rec FROM media WHERE id = $1 AND company_id = $2 AND device_id = $3
			AND message_id IS NULL FOR UPDATE`, ref.ID, id(m.CompanyID), id(m.DeviceID))
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: media[%d] %q", store.ErrMediaUnknown, i, ref.ID)
		}
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// attachMedia gives m, which has its id, the files lockMedia locked for
// it, and fills in its refs.
func attachMedia(t *txn, m *store.Message, files []store.Media) error {
	for i, md := range files {
		md.MessageID = m.ID
		raw, err := rec(md)
		if err != nil {
			return err
		}
		if _, err := t.exec("UPDATE media SET message_id = $2, rec = $3 WHERE id = $1", md.ID, id(m.ID), raw); err != nil {
			return err
		}
		m.Media[i] = md.Ref()
	}
	return nil
}

// PruneMedia deletes the uploads no message took that were made before
// cutoff, the oldest first and at most limit per call (a transaction stays
// short), with their bytes, and returns how many.
func (s *Store) PruneMedia(cutoff time.Time, limit int) (int, error) {
	var n int
	err := s.write("prune media", func(t *txn) error {
		tag, err := t.exec(`DELETE FROM media WHERE id IN (
			SELECT id FROM media WHERE message_id IS NULL AND created_at < $1 ORDER BY created_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)`, cutoff, limit)
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
