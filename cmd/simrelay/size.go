package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag of a number of bytes: a plain integer, or one with a
// binary unit (KiB, MiB, GiB, TiB), e.g. 256MiB.
type byteSize int64

var byteUnits = []struct {
	suffix string
	size   int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

func (b *byteSize) String() string {
	v := int64(*b)
	for _, u := range byteUnits {
		if v != 0 && v%u.size == 0 {
			return strconv.FormatInt(v/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(v, 10)
}

func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(strings.ToLower(s), strings.ToLower(u.suffix)) {
			s, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.size
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("want a number of bytes such as 268435456 or 256MiB (units KiB, MiB, GiB, TiB), 0 for no limit")
	}
	*b = byteSize(n * mult)
	return nil
}
