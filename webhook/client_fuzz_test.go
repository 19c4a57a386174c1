package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/egress"
	"github.com/simrelay/simrelay/internal/egress/egresstest"
)

// FuzzClientDial checks what the deliveries' client actually dials: a
// connection to any address the documents call non-public
// (egresstest.Public) is refused by its dialer with egress.ErrNonPublic,
// before a packet leaves (Control runs before connect). Public addresses
// are not dialled: the test reaches no network.
func FuzzClientDial(f *testing.F) {
	egresstest.AddDialSeeds(f)
	tr := NewClient(Config{Timeout: 5 * time.Second}).Transport.(*http.Transport)
	f.Fuzz(func(t *testing.T, raw []byte, is4 bool) {
		a := egresstest.DialAddr(raw, is4)
		if egresstest.Public(a) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := tr.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), "443"))
		if err == nil {
			conn.Close()
		}
		if !errors.Is(err, egress.ErrNonPublic) {
			t.Fatalf("dial %s: %v, want egress.ErrNonPublic", a, err)
		}
	})
}
