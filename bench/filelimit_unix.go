//go:build unix

package bench

import (
	"fmt"
	"syscall"
)

// phonesWithinLimit raises the open-file limit as far as allowed and caps
// the phones to fit: the bench holds one descriptor a phone, the server
// another. The note says why fewer phones than asked run; empty when all do.
func phonesWithinLimit(want int) (int, string) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return want, ""
	}
	lim.Cur = lim.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	room := int(lim.Cur) - 1000
	if room >= want {
		return want, ""
	}
	return max(room, 1), fmt.Sprintf("the open-file limit (%d) allows %d phones, not %d: raise it with `ulimit -n %d` (and the hard limit in /etc/security/limits.conf) and run again", lim.Cur, max(room, 1), want, want+1000)
}
