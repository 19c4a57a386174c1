package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
)

// lookupHook is the device service with a hook run before each device
// lookup (Get) with its arguments; an error from it is the lookup's.
type lookupHook struct {
	*device.Service
	before func(companyID uint64, fingerprint string) error
}

func (l lookupHook) Get(ctx context.Context, companyID uint64, fingerprint string) (store.Device, error) {
	if err := l.before(companyID, fingerprint); err != nil {
		return store.Device{}, err
	}
	return l.Service.Get(ctx, companyID, fingerprint)
}

// staleHello opens a link on the device's token, registers the device
// again (the token the link was upgraded with is revoked), and says hello:
// the hub's second look finds the token dead and looks the device up.
func staleHello(t *testing.T, r *rig, fingerprint string) int {
	t.Helper()
	old := r.pair(fingerprint)
	ws, _, err := r.dial(old, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	r.pair(fingerprint) // registered again: old is revoked
	writeFrame(t, ws, proto.Hello{Protocol: 1, AppVersion: "test", SelectedSIM: "BOTH", SIMs: []proto.SIM{{Slot: "SIM1"}}})
	return int(closeCode(t, ws))
}

// The database that goes away between the link's second look at its token
// and its lookup of the device says nothing of the device: the link closes
// with 1013, which brings the phone back within seconds, not with 4503
// (device deleted), after which it would stop reconnecting for good.
func TestDeviceLookupWhileTheDatabaseIsGoneCloses1013(t *testing.T) {
	storetest.PostgresEitherWay(t)
	t.Parallel()
	relay := pgtest.Relay(t, pgtest.URL(t))
	st := openStore(t, relay.URL)
	// The hub looks a device up only there.
	r := newRigHub(t, st, Config{}, time.Now, nil, hubSetup{devices: func(d *device.Service) Devices {
		return lookupHook{d, func(uint64, string) error { relay.Cut(); return nil }}
	}})
	if code := staleHello(t, r, "db-lookup-1"); code != proto.CloseTryAgainLater {
		t.Fatalf("a link whose device lookup found the database gone closed with %d, want 1013\n%s", code, r.logs.String())
	}
	if !strings.Contains(r.logs.String(), `msg="look up device of a revoked token: the database does not answer"`) {
		t.Fatalf("the hub's log does not say why:\n%s", r.logs.String())
	}
}

// A device lookup that fails for another reason is the server's fault:
// 1011, not 4503.
func TestDeviceLookupFailureCloses1011(t *testing.T) {
	t.Parallel()
	broken := errors.New("the lookup broke")
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{devices: func(d *device.Service) Devices {
		return lookupHook{d, func(uint64, string) error { return broken }}
	}})
	if code := staleHello(t, r, "lookup-broken-1"); code != proto.CloseInternalError {
		t.Fatalf("a link whose device lookup failed closed with %d, want 1011\n%s", code, r.logs.String())
	}
	if !strings.Contains(r.logs.String(), "the lookup broke") {
		t.Fatalf("the hub's log does not name the failure:\n%s", r.logs.String())
	}
}

// A device deleted between the link's second look at its token and its
// lookup is gone: 4503.
func TestDeviceDeletedBeforeLookupCloses4503(t *testing.T) {
	t.Parallel()
	r := newRigHub(t, storetest.OpenWith(t, storetest.Options{}), Config{}, time.Now, nil, hubSetup{devices: func(d *device.Service) Devices {
		return lookupHook{d, func(companyID uint64, fingerprint string) error {
			_, err := d.Delete(context.Background(), companyID, fingerprint)
			return err
		}}
	}})
	if code := staleHello(t, r, "deleted-1"); code != proto.CloseDeviceGone {
		t.Fatalf("a link whose device was deleted before its lookup closed with %d, want 4503\n%s", code, r.logs.String())
	}
}
