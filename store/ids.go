package store

import (
	"math"
	"strconv"
)

// NoID is an id no record has: both backends count ids up from 1, and
// PostgreSQL's are bigints, which this is past.
const NoID uint64 = math.MaxUint64

// ParseID reads a record's id as an address gives it (/pools/{id}), in
// decimal digits, written as the API writes ids: without leading zeros.
// Text that cannot name a record, not digits (1e20, abc, -1), 0 (which a
// write reads as "a new one"), digits past the largest id, or another
// spelling of an id (01, 007: strconv reads the zeros, which gave one record
// many addresses), is NoID: the route looks it up as it looks up every id
// and answers it as it answers one that names nothing, with the same 404
// body ("No such pool."), after the same checks of the rest of the request.
func ParseID(s string) uint64 {
	if s == "" || s[0] == '0' {
		return NoID
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return NoID
	}
	return id
}
