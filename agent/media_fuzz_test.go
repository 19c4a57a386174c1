package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/egress"
	"github.com/simrelay/simrelay/internal/egress/egresstest"
)

// FuzzMediaDial checks what a media download actually dials: a connection
// to any address the documents call non-public (egresstest.Public) is
// refused by the fetcher's dialer with egress.ErrNonPublic, before a packet
// leaves (Control runs before connect), also when the fetcher is given a
// dialer of its own. Public addresses are not dialled: the test reaches no
// network.
func FuzzMediaDial(f *testing.F) {
	egresstest.AddDialSeeds(f)
	// A dialer of the caller's with a ControlContext, which net.Dialer
	// would prefer to Control.
	own := &net.Dialer{Timeout: 5 * time.Second, ControlContext: func(context.Context, string, string, syscall.RawConn) error { return nil }}
	transports := []*http.Transport{
		MediaFetcher{}.client(5 * time.Second).Transport.(*http.Transport),
		MediaFetcher{Dialer: own}.client(5 * time.Second).Transport.(*http.Transport),
	}
	f.Fuzz(func(t *testing.T, raw []byte, is4 bool) {
		a := egresstest.DialAddr(raw, is4)
		if egresstest.Public(a) {
			return
		}
		for i, tr := range transports {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			conn, err := tr.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), "443"))
			cancel()
			if err == nil {
				conn.Close()
			}
			if !errors.Is(err, egress.ErrNonPublic) {
				t.Fatalf("fetcher %d: dial %s: %v, want egress.ErrNonPublic", i, a, err)
			}
		}
	})
}
