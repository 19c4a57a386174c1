package boltstore

import (
	"bytes"
	"fmt"

	"github.com/simrelay/simrelay/store"

	bolt "go.etcd.io/bbolt"
)

// exportScanLimit bounds how many message records one page of an export
// looks at, matching or not, so each read transaction stays short even when
// the company owns few of the store's messages.
const exportScanLimit = 4096

// CompanyMessagesAfter returns up to limit messages of the company with ids
// above after, oldest first, up to the one whose text brings the page's to
// store.ExportPageText, in one short read transaction. next is the id to
// continue after, and done says the store has no more messages. A page may be
// empty without being the last: each looks at a bounded number of records.
//
// Messages are keyed by id across companies, so an export walks them all; that
// costs one pass over the store, paged, and never holds a transaction between pages.
func (s *Store) CompanyMessagesAfter(companyID, after uint64, limit int) (msgs []Message, next uint64, done bool, err error) {
	next = after
	err = s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketMessages).Cursor()
		scanned, text := 0, 0
		k, v := c.Seek(itob(after + 1))
		for ; k != nil; k, v = c.Next() {
			if len(msgs) >= limit || scanned >= exportScanLimit {
				return nil
			}
			scanned++
			next = btoi(k)
			owner, err := messageCompany(v)
			if err != nil {
				return fmt.Errorf("message %d: %w", next, err)
			}
			if owner != companyID {
				continue
			}
			var m Message
			if err := jsonUnmarshal(v, &m); err != nil {
				return fmt.Errorf("message %d: %w", next, err)
			}
			msgs = append(msgs, m)
			if text += len(m.Text); text >= store.ExportPageText {
				return nil // not done: next is this message's id
			}
		}
		done = true
		return nil
	})
	if err != nil {
		return nil, after, false, fmt.Errorf("store: messages of company %d: %w", companyID, err)
	}
	return msgs, next, done, nil
}

// LastMessageID is the highest id a stored message has, of any company (0
// in a store without messages): a company's export walks its messages up
// to it, the store as it was when the export began.
func (s *Store) LastMessageID() (uint64, error) {
	var last uint64
	err := s.view(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketMessages).Cursor().Last(); k != nil {
			last = btoi(k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: last message id: %w", err)
	}
	return last, nil
}

// ConversationsAfter returns up to limit of a device's conversations (company
// and device id) whose number sorts after the given one ("" for the first
// page), in number order, up to the one whose last message brings their
// texts to store.ExportPageText (store.ExportPageFull says to read on).
func (s *Store) ConversationsAfter(companyID, deviceID uint64, after string, limit int) ([]Conversation, error) {
	var out []Conversation
	err := s.view(func(tx *bolt.Tx) error {
		prefix := devKey(companyID, deviceID)
		c := tx.Bucket(bucketConversations).Cursor()
		start, text := prefix, 0
		if after != "" {
			start = convKey(companyID, deviceID, after)
		}
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = c.Next() {
			if after != "" && bytes.Equal(k, start) {
				continue
			}
			var cv Conversation
			if err := jsonUnmarshal(v, &cv); err != nil {
				return err
			}
			out = append(out, cv)
			if text += len(cv.LastMessage); text >= store.ExportPageText {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: conversations of device %d: %w", deviceID, err)
	}
	return out, nil
}
