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

// staleRig is a rig on st whose device lookups run before first
// (lookupHook), and whose device is registered again (the token its link
// was upgraded with revoked) once a link's hello is stored (helloStored):
// the hub's second look then finds the token dead and looks the device
// up. Registered again before the hello, the link would be refused by the
// hello's write, which checks the token too.
func staleRig(t *testing.T, st store.Backend, before func(d *device.Service, companyID uint64, fingerprint string) error) *rig {
	t.Helper()
	return newRigHub(t, st, Config{}, time.Now, nil, hubSetup{devices: func(d *device.Service) Devices {
		lookup := func(companyID uint64, fingerprint string) error { return before(d, companyID, fingerprint) }
		return helloStored{lookupHook{d, lookup}, func(dev store.Device) { pairAgain(t, d, dev.CompanyID, dev.Fingerprint) }}
	}})
}

// pairAgain registers the device again through the device service, as
// rig.pair does, revoking its token; from a hub's goroutine, where a
// failure is the test's error.
func pairAgain(t testing.TB, d *device.Service, companyID uint64, fingerprint string) {
	ctx := context.Background()
	p, err := d.CreatePairing(ctx, companyID, 0)
	if err == nil {
		_, err = d.Register(ctx, device.RegisterInput{PairingCode: p.Code, DeviceFingerprint: fingerprint, SIMs: []store.SIM{{Slot: "SIM1"}}})
	}
	if err != nil {
		t.Errorf("register %s again: %v", fingerprint, err)
	}
}

// staleHello opens a link on the device's token and says hello, on a
// staleRig: the device is registered again between the hello's write and
// the link's second look.
func staleHello(t *testing.T, r *rig, fingerprint string) int {
	t.Helper()
	ws, _, err := r.dial(r.pair(fingerprint), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
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
	r := staleRig(t, st, func(*device.Service, uint64, string) error { relay.Cut(); return nil })
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
	r := staleRig(t, storetest.OpenWith(t, storetest.Options{}), func(*device.Service, uint64, string) error { return broken })
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
	r := staleRig(t, storetest.OpenWith(t, storetest.Options{}), func(d *device.Service, companyID uint64, fingerprint string) error {
		_, err := d.Delete(context.Background(), companyID, fingerprint)
		return err
	})
	if code := staleHello(t, r, "deleted-1"); code != proto.CloseDeviceGone {
		t.Fatalf("a link whose device was deleted before its lookup closed with %d, want 4503\n%s", code, r.logs.String())
	}
}
