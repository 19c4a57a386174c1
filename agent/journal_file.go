package agent

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/simrelay/simrelay/internal/boltfile"
)

// bbolt reads its file through a memory map and trusts what it finds: a
// page the file does not hold (a journal cut short: a full disk, a copy
// interrupted) is a fault that kills the process (SIGBUS), and a page that
// names itself as its child (garbage written over a page) makes its cursor
// loop until memory runs out. Neither is an error bbolt can return. So
// before bbolt opens the journal, checkJournalFile reads the tree that
// bbolt would use from the file, with plain reads, and refuses as damaged
// a file that is shorter than its meta page says, or whose tree names a
// page outside the file, a page twice, an element outside its page, or
// keys out of order in a page.

// The layout of bbolt's pages (go.etcd.io/bbolt internal/common), in the
// machine's byte order; its meta pages are decoded by boltfile. Pages: a
// header of id, flags, count and overflow, then 16-byte elements; a
// bucket's value starts with its root page and sequence, followed by the
// bucket's own page when it is inline (root 0).
const (
	pageHeader   = boltfile.PageHeaderSize
	elemSize     = 16
	bucketHeader = 16
	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10
	bucketLeaf   = 0x01
)

// readMeta decodes the meta page at off; an unreadable one is not valid.
func readMeta(f io.ReaderAt, off int64) boltfile.Meta {
	m, _ := boltfile.Read(f, off)
	return m
}

// checkJournalFile checks the journal file as bbolt will read it (its
// newest valid meta page, and the tree and freelist that page names). A
// file with no valid meta page is left to bbolt, which refuses it itself
// (ErrInvalid, ErrChecksum), and so is one that cannot be opened or is
// absent (bbolt says why, or creates it).
func checkJournalFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	m0 := readMeta(f, 0)
	pageSize := uint64(os.Getpagesize())
	if m0.Valid() {
		pageSize = uint64(m0.PageSize)
	} else {
		// Where bbolt looks for the second meta page when the first is
		// gone: at each page size from 1 KiB to 16 MiB.
		for i := 0; i <= 14; i++ {
			if m := readMeta(f, 1024<<i); m.Valid() {
				pageSize = uint64(m.PageSize)
				break
			}
		}
	}
	use, ok := boltfile.Newest(m0, readMeta(f, int64(pageSize)))
	if !ok {
		return nil
	}
	pageSize = uint64(use.PageSize) // the one of the meta page in use
	size := uint64(st.Size())
	if pageSize < 1024 || pageSize > 1<<30 || use.Pgid > size/pageSize {
		return fmt.Errorf("cut short: %d bytes, where its header counts %d pages of %d bytes", size, use.Pgid, pageSize)
	}
	w := &pageWalk{f: f, m: use, seen: map[uint64]bool{}}
	if err := w.tree(use.Root); err != nil {
		return err
	}
	if use.Freelist != boltfile.NoFreelist {
		return w.freelist()
	}
	return nil
}

// pageWalk reads the pages of one journal file, each at most once.
type pageWalk struct {
	f    io.ReaderAt
	m    boltfile.Meta   // the meta page bbolt uses
	seen map[uint64]bool // pages read: a second reference is damage
}

// page reads page id whole (with its overflow pages).
func (w *pageWalk) page(id uint64) ([]byte, error) {
	if id < 2 || id >= w.m.Pgid || w.seen[id] {
		return nil, fmt.Errorf("page %d named where it cannot be (of %d pages)", id, w.m.Pgid)
	}
	w.seen[id] = true
	pageSize := uint64(w.m.PageSize)
	var hdr [pageHeader]byte
	if _, err := w.f.ReadAt(hdr[:], int64(id*pageSize)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if self := binary.NativeEndian.Uint64(hdr[0:]); self != id { // bbolt asserts it, with a panic
		return nil, fmt.Errorf("page %d names itself page %d", id, self)
	}
	overflow := uint64(binary.NativeEndian.Uint32(hdr[12:]))
	if id+overflow+1 > w.m.Pgid {
		return nil, fmt.Errorf("page %d runs past the %d pages", id, w.m.Pgid)
	}
	for i := uint64(1); i <= overflow; i++ {
		if w.seen[id+i] {
			return nil, fmt.Errorf("page %d overlaps page %d", id, id+i)
		}
		w.seen[id+i] = true
	}
	buf := make([]byte, (overflow+1)*pageSize)
	if _, err := w.f.ReadAt(buf, int64(id*pageSize)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return buf, nil
}

// freelist checks the freelist page: its ids are pages of the file that
// the tree does not hold, each once. It runs after tree.
func (w *pageWalk) freelist() error {
	p, err := w.page(w.m.Freelist)
	if err != nil {
		return err
	}
	ne := binary.NativeEndian
	if ne.Uint16(p[8:]) != freelistPage {
		return fmt.Errorf("freelist page %d is no freelist", w.m.Freelist)
	}
	start, count := uint64(pageHeader), uint64(ne.Uint16(p[10:]))
	if count == 0xFFFF { // the count is the first element
		count, start = ne.Uint64(p[pageHeader:]), pageHeader+8
	}
	if count > uint64(len(p)) || start+count*8 > uint64(len(p)) {
		return fmt.Errorf("freelist page %d holds more than it has room for", w.m.Freelist)
	}
	for i := range count {
		// A page freed twice, or freed while the tree holds it, would be
		// handed to two writes.
		id := ne.Uint64(p[start+i*8:])
		if id < 2 || id >= w.m.Pgid || w.seen[id] {
			return fmt.Errorf("freelist page %d frees page %d, outside the file or in use", w.m.Freelist, id)
		}
		w.seen[id] = true
	}
	return nil
}

// tree checks the pages under a bucket's root page.
func (w *pageWalk) tree(id uint64) error {
	p, err := w.page(id)
	if err != nil {
		return err
	}
	return w.node(id, p)
}

// node checks one branch or leaf page (p holds it whole) and what it names.
func (w *pageWalk) node(id uint64, p []byte) error {
	ne := binary.NativeEndian
	if len(p) < pageHeader {
		return fmt.Errorf("page %d: too short", id)
	}
	flags, count := ne.Uint16(p[8:]), uint64(ne.Uint16(p[10:]))
	if flags != branchPage && flags != leafPage || flags == branchPage && count == 0 {
		return fmt.Errorf("page %d is neither a branch nor a leaf", id)
	}
	if pageHeader+count*elemSize > uint64(len(p)) {
		return fmt.Errorf("page %d: %d elements do not fit", id, count)
	}
	// bbolt finds a key by binary search over a page's keys: keys out of
	// order (a page written over) hide some, a bucket among them, which
	// bbolt then reads as absent (a nil bucket, which its callers do not
	// expect) and would write a second time.
	var prev []byte
	ordered := func(i uint64, key []byte) error {
		if i > 0 && bytes.Compare(prev, key) >= 0 {
			return fmt.Errorf("page %d: element %d out of order", id, i)
		}
		prev = key
		return nil
	}
	for i := range count {
		at := pageHeader + i*elemSize
		e := p[at : at+elemSize]
		switch {
		case flags == branchPage:
			pos, ksize := uint64(ne.Uint32(e[0:])), uint64(ne.Uint32(e[4:]))
			if at+pos+ksize > uint64(len(p)) {
				return fmt.Errorf("page %d: element %d outside its page", id, i)
			}
			if ksize == 0 { // bbolt asserts every key has a byte, with a panic
				return fmt.Errorf("page %d: element %d has no key", id, i)
			}
			if err := ordered(i, p[at+pos:at+pos+ksize]); err != nil {
				return err
			}
			if err := w.tree(ne.Uint64(e[8:])); err != nil {
				return err
			}
		default: // a leaf
			eflags, pos := ne.Uint32(e[0:]), uint64(ne.Uint32(e[4:]))
			ksize, vsize := uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
			end := at + pos + ksize + vsize
			if end > uint64(len(p)) {
				return fmt.Errorf("page %d: element %d outside its page", id, i)
			}
			if ksize == 0 {
				return fmt.Errorf("page %d: element %d has no key", id, i)
			}
			if err := ordered(i, p[at+pos:at+pos+ksize]); err != nil {
				return err
			}
			if eflags&bucketLeaf == 0 {
				continue
			}
			v := p[at+pos+ksize : end]
			if len(v) < bucketHeader {
				return fmt.Errorf("page %d: bucket %d too short", id, i)
			}
			if root := ne.Uint64(v); root != 0 {
				if err := w.tree(root); err != nil {
					return err
				}
			} else if err := w.inline(id, v[bucketHeader:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// inline checks a bucket kept in its parent's value (root 0): a leaf, as
// bbolt reads it, which names no page of its own.
func (w *pageWalk) inline(parent uint64, p []byte) error {
	if len(p) < pageHeader || binary.NativeEndian.Uint16(p[8:]) != leafPage {
		return fmt.Errorf("page %d: an inline bucket that is no leaf", parent)
	}
	return w.node(parent, p)
}
