package web_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/store"
)

// summaryReads counts the device service's reads of the devices' queue
// depths and failures (store.Backend.DeviceSummaries).
type summaryReads struct {
	device.Store
	n atomic.Int64
}

func (s *summaryReads) DeviceSummaries(companyID uint64, ids []uint64) (map[uint64]store.DeviceSummary, error) {
	s.n.Add(1)
	return s.Store.DeviceSummaries(companyID, ids)
}

// TestConsoleReadsQueueDepthsOnlyWhereShown: the devices page's cards show
// each device's queue depth and last failures, read in one more read of
// the store; the badges' reload and the pairing panel's poll (the devices
// state), the messages page and the pools page show neither, and read
// neither. Each read them: the pairing panel every 1.5 s, the devices page
// and the numbers list on each catch-up.
func TestConsoleReadsQueueDepthsOnlyWhereShown(t *testing.T) {
	t.Parallel()
	reads := &summaryReads{}
	e := newEnv(t, func(o *envOptions) {
		o.deviceStore = func(st device.Store) device.Store { reads.Store = st; return reads }
	})
	b := e.acmeWithPhone()
	for _, c := range []struct {
		path string
		want int64
	}{
		{"/console/devices", 1},
		{"/console/devices/state", 0},
		{"/console/devices/state?pairing=nope", 0},
		{"/console/messages?device=fp-1", 0},
		{"/console/pools", 0},
	} {
		before := reads.n.Load()
		p := b.get(c.path)
		if p.status != http.StatusOK {
			t.Fatalf("GET %s: %d", c.path, p.status)
		}
		if got := reads.n.Load() - before; got != c.want {
			t.Errorf("GET %s read the queue depths %d times, want %d", c.path, got, c.want)
		}
		if strings.HasPrefix(c.path, "/console/devices/state") && (strings.Contains(p.body, "queue_depth") || strings.Contains(p.body, "last_failures") || !strings.Contains(p.body, `"online":`)) {
			t.Errorf("GET %s answered %s; want the badges without queue depths or failures", c.path, p.body)
		}
	}
}
