package gateway

import (
	"errors"
	"fmt"
	"testing"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/store"
)

// numberReadFails is the agents' store with the read of a number by its
// store id (the one a dispatch makes before a job goes) failing with err.
type numberReadFails struct {
	channel.Store
	err error
}

func (s numberReadFails) AgentNumberByRef(uint64, uint64) (store.AgentNumber, error) {
	return store.AgentNumber{}, s.err
}

// A store fault while the hub checks that a number's job may go ends the
// link as every other store fault of a link does (1011, or 1013 while the
// database does not answer), logged: the agent comes back and its hello
// reads the queue again. It held the job a minute, on an open link,
// without a word.
func TestAgentReadyStoreFaultEndsTheLink(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		code int
	}{
		{"fault", errors.New("disk read error"), proto.CloseInternalError},
		{"unavailable", fmt.Errorf("the database does not answer: %w", store.ErrUnavailable), proto.CloseTryAgainLater},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newMoveWorld(t)
			token := w.pair("ready-agent")
			node := w.startWith(moveOptions{store: func(st channel.Store) channel.Store { return numberReadFails{st, c.err} }})
			ws := node.link(token, moveNumber)
			node.send("waits for its number's read")
			if got := closeCode(t, ws); int(got) != c.code {
				t.Fatalf("the link closed with %d, want %d", got, c.code)
			}
		})
	}
}
