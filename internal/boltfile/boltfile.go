// Package boltfile decodes the header of a bbolt file, its meta pages, with
// plain reads: what the embedded store and the agent's journal check
// before bbolt maps a file into memory, which trusts what it finds there
// (a file shorter than its header says is a SIGBUS, not an error).
package boltfile

import (
	"encoding/binary"
	"hash/fnv"
	"io"
)

// The layout of a bbolt meta page (go.etcd.io/bbolt internal/common: Page,
// Meta). Pages 0 and 1 are meta pages: a page header (id, flags, count,
// overflow), then magic, version, page size and flags (uint32 each), the
// root bucket (its root page and sequence), the freelist page, the
// high-water page id and the txid (uint64 each), then an FNV-64a checksum
// of the meta fields before it. Integers are in the machine's byte order.
const (
	Magic          = 0xED0CDAED
	Version        = 2
	PageHeaderSize = 16 // every page's header: id, flags, count, overflow
	sumLen         = 56 // bytes of the meta covered by its checksum
	// MetaLen is how many bytes of a meta page, from its start, Read
	// reads: the page header, the meta and its checksum.
	MetaLen = PageHeaderSize + sumLen + 8
)

// NoFreelist is Meta.Freelist of a file that keeps no freelist.
const NoFreelist = ^uint64(0)

// Meta is a meta page as the file holds it, valid or not.
type Meta struct {
	Magic, Version, PageSize uint32
	Root                     uint64 // the root bucket's root page
	Freelist                 uint64 // the freelist's page; NoFreelist when the file keeps none
	Pgid                     uint64 // the high-water page id: the file holds at least this many pages
	Txid                     uint64
	SumOK                    bool // the checksum holds
}

// Valid says bbolt would use the meta page: its magic, version and
// checksum hold. Of two valid ones, bbolt uses the one of the higher Txid.
func (m Meta) Valid() bool { return m.Magic == Magic && m.Version == Version && m.SumOK }

// Newest is the meta page bbolt uses of those given (pages 0 and 1, in that
// order): the valid one of the higher Txid, the first of a tie; false when
// none is valid.
func Newest(metas ...Meta) (Meta, bool) {
	var use Meta
	found := false
	for _, m := range metas {
		if m.Valid() && (!found || m.Txid > use.Txid) {
			use, found = m, true
		}
	}
	return use, found
}

// decode decodes the meta page at the start of b; ok is false when b is
// shorter than MetaLen.
func decode(b []byte) (m Meta, ok bool) {
	if len(b) < MetaLen {
		return Meta{}, false
	}
	ne := binary.NativeEndian
	p := b[PageHeaderSize:]
	m = Meta{Magic: ne.Uint32(p[0:]), Version: ne.Uint32(p[4:]), PageSize: ne.Uint32(p[8:]),
		Root: ne.Uint64(p[16:]), Freelist: ne.Uint64(p[32:]), Pgid: ne.Uint64(p[40:]), Txid: ne.Uint64(p[48:])}
	h := fnv.New64a()
	_, _ = h.Write(p[:sumLen])
	m.SumOK = h.Sum64() == ne.Uint64(p[sumLen:])
	return m, true
}

// Read decodes the meta page at offset off of r. Its error is the read's
// (io.EOF from an os.File that ends before MetaLen bytes).
func Read(r io.ReaderAt, off int64) (Meta, error) {
	var buf [MetaLen]byte
	if _, err := r.ReadAt(buf[:], off); err != nil {
		return Meta{}, err
	}
	m, _ := decode(buf[:])
	return m, nil
}
