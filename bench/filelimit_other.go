//go:build !unix

package bench

import "fmt"

// phonesWithinLimit runs the phones asked for: this system has no
// open-file limit (RLIMIT_NOFILE) the bench can read or raise, so the note
// says so, and that a limit of its own shows as phones failing to connect.
func phonesWithinLimit(want int) (int, string) {
	return want, fmt.Sprintf("the bench cannot read or raise the open-file limit on this system: it runs the %d phones asked for, and phones that fail to connect may mean the system ran out of sockets or handles", want)
}
