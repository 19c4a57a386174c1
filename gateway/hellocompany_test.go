package gateway

import (
	"sync/atomic"
	"testing"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/store"
)

// companyReads is the agents' store, counting its reads of a company (the
// region a hello's numbers are read in: the device's company, store
// DeviceCompany, or any company).
type companyReads struct {
	channel.Store
	n atomic.Int64
}

func (s *companyReads) Company(id uint64) (store.Company, error) {
	s.n.Add(1)
	return s.Store.Company(id)
}

func (s *companyReads) DeviceCompany(companyID, deviceID uint64) (store.Company, error) {
	s.n.Add(1)
	return s.Store.DeviceCompany(companyID, deviceID)
}

// TestAgentHelloReadsItsCompanyOnce: an agent's hello that names numbers
// is checked once, before any part of it is stored, and the numbers the
// check found are the ones stored: the company's region, which the
// numbers are read in, is read once. The check and the write each read
// it, and held the numbers to their rules, before. A hello that names
// none reads it not at all, whether it lets numbers go or holds none.
func TestAgentHelloReadsItsCompanyOnce(t *testing.T) {
	t.Parallel()
	w := newMoveWorld(t)
	reads := &companyReads{}
	node := w.startWith(moveOptions{store: func(s channel.Store) channel.Store { reads.Store = s; return reads }})
	read := func(want int64, when string) {
		t.Helper()
		if got := reads.n.Swap(0); got != want {
			t.Errorf("%s: the agents' service read the company %d times, want %d", when, got, want)
		}
	}
	agent := w.pair("company-once-agent")
	node.link(agent, moveNumber, "+15550108888").CloseNow()
	read(1, "a hello naming two numbers")
	node.link(agent).CloseNow()
	read(0, "a hello naming none, letting its numbers go")
	node.link(w.pair("company-once-sms")).CloseNow()
	read(0, "an SMS phone's hello")
}
