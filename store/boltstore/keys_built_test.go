package boltstore

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

// TestKeysAsBuiltBefore holds the keys built in one slice of their own
// size to the bytes they were built as by appending to itob.
func TestKeysAsBuiltBefore(t *testing.T) {
	ids := []uint64{0, 1, 2, 1 << 40, math.MaxUint64}
	for _, a := range ids {
		for _, b := range ids {
			if got, want := pair(a, b), append(itob(a), itob(b)...); !bytes.Equal(got, want) {
				t.Errorf("pair(%d, %d) = %x, want %x", a, b, got, want)
			}
		}
	}
	for _, phone := range []string{"", "+15551234567", "15557650001", strings.Repeat("9", 40), "+4930\u00e9"} {
		for _, cid := range ids {
			if got, want := optOutKey(cid, phone), append(itob(cid), phone...); !bytes.Equal(got, want) {
				t.Errorf("optOutKey(%d, %q) = %x, want %x", cid, phone, got, want)
			}
		}
	}
	for _, at := range []time.Time{{}, time.Unix(0, 0), time.Unix(-1, 5), time.Date(2026, 11, 30, 7, 0, 0, 123, time.UTC),
		time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC)} {
		for _, id := range ids {
			if got, want := expiryKey(at, id), append(timeKey(at), itob(id)...); !bytes.Equal(got, want) {
				t.Errorf("expiryKey(%v, %d) = %x, want %x", at, id, got, want)
			}
		}
	}
}
