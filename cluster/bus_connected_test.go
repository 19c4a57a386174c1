package cluster_test

import (
	"strings"
	"testing"

	"github.com/simrelay/simrelay/cluster"
)

// Connected follows the client's handlers in the order its dispatcher runs
// them, which is the order the client queued them, not always the order of
// the events: Connect queues the connect handler once the handshake is
// done, as it returns, and a connection that ends at once has its
// disconnect handler queued first by the client's reader (a server that
// hangs up right after the handshake: some connections in a thousand under
// the race detector). Connected then said true for as long as the client
// tried to reconnect: with the server gone, until the node stopped. A
// connect handler that runs after a disconnection says nothing; the
// reconnect handler says when the client is back.
func TestConnectedFollowsAConnectHandlerQueuedLate(t *testing.T) {
	for _, c := range []struct {
		handlers string
		want     bool
	}{
		{"connect", true},
		{"connect disconnect", false},
		{"connect disconnect reconnect", true},
		{"connect disconnect close", false},
		// The connect handler queued after the disconnect handler.
		{"disconnect connect", false},
		{"disconnect reconnect connect", true},
		{"disconnect reconnect disconnect connect", false},
		{"disconnect close connect", false},
	} {
		if got := cluster.ConnectedAfter(strings.Fields(c.handlers)...); got != c.want {
			t.Errorf("handlers %s: Connected %v, want %v", c.handlers, got, c.want)
		}
	}
}
