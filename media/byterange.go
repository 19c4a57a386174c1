package media

import (
	"strconv"
	"strings"
)

// byteRange reads a Range header of one byte range against a file of size
// bytes: the first byte and the count it asks for. parsed is false for a
// header Serve ignores (another unit, several ranges, bad syntax, last
// before first); fits is false for a range that starts at or past the
// end, or a suffix of no bytes.
func byteRange(spec string, size int64) (first, count int64, parsed, fits bool) {
	unit, set, ok := strings.Cut(spec, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") || strings.Contains(set, ",") {
		return 0, 0, false, false
	}
	from, to, ok := strings.Cut(strings.TrimSpace(set), "-")
	if !ok {
		return 0, 0, false, false
	}
	if from == "" { // -suffix: the last bytes
		n, ok := digits(to)
		if !ok {
			return 0, 0, false, false
		}
		if n == 0 || size == 0 {
			return 0, 0, true, false
		}
		n = min(n, size)
		return size - n, n, true, true
	}
	a, ok := digits(from)
	if !ok {
		return 0, 0, false, false
	}
	last := size - 1
	if to != "" {
		b, ok := digits(to)
		if !ok || b < a {
			return 0, 0, false, false
		}
		last = min(b, last)
	}
	if a >= size {
		return 0, 0, true, false
	}
	return a, last - a + 1, true, true
}

// digits reads a byte position: ASCII digits only; one too big for int64
// is as far as int64 goes, past any file's end.
func digits(s string) (int64, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 1<<63 - 1, true
	}
	return n, true
}
