package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook"
)

// exportReads is the store, counting the reads an export's cost is
// measured by: a user's (each check of an access token reads its user
// again) and the SIM caps'.
type exportReads struct {
	store.Backend
	users, simCaps atomic.Int64
}

func (r *exportReads) User(id uint64) (store.User, error) {
	r.users.Add(1)
	return r.Backend.User(id)
}

func (r *exportReads) CompanySIMCaps(companyID uint64) (map[uint64]map[string]store.SIMCaps, error) {
	r.simCaps.Add(1)
	return r.Backend.CompanySIMCaps(companyID)
}

func (r *exportReads) SIMUsages(companyID uint64, fingerprint string, now time.Time) ([]store.SIMUsage, error) {
	r.simCaps.Add(1)
	return r.Backend.SIMUsages(companyID, fingerprint, now)
}

// TestCompanyExportCostsNoReadsPerDevice: an export's credential is
// checked again as it writes records (before the first and then before
// each 500th), not per device: a company of many devices and no
// conversations was checked once per device, each check of an access
// token a read of its user, and its SIMs' caps were read a device at a
// time. With an admin's access token, the export of 300 such devices
// reads the user only to let the request in and the caps in one read;
// given a conversation and a message each (600 records), it checks the
// credential twice more.
func TestCompanyExportCostsNoReadsPerDevice(t *testing.T) {
	t.Parallel()
	reads := &exportReads{Backend: storetest.OpenWith(t, storetest.Options{})}
	e := newEnvOn(t, reads, webhook.Config{}, billing.Config{}, roomy)
	a := e.newCompany("Acme", "owner@acme.test")
	const n = 300
	devs := make([]store.Device, n)
	for i := range devs {
		devs[i] = store.Device{Fingerprint: fmt.Sprintf("acme-%03d", i), CompanyID: uint64(a.id), Status: store.DeviceActive,
			TokenHash: []byte(fmt.Sprint("acme-token-", i)), CreatedAt: e.clock.Now()}
	}
	if err := e.store.ProvisionDevices(devs); err != nil {
		t.Fatal(err)
	}
	export := func() (users, simCaps int64, doc struct{ Devices, Conversations, Messages []json.RawMessage }) {
		t.Helper()
		u, c := reads.users.Load(), reads.simCaps.Load()
		r := e.do(call{method: "GET", path: "/company/export", token: a.access})
		e.want(r, http.StatusOK, "")
		if err := json.Unmarshal(r.Raw, &doc); err != nil {
			t.Fatalf("the export does not parse: %v", err)
		}
		return reads.users.Load() - u, reads.simCaps.Load() - c, doc
	}

	users, simCaps, doc := export()
	if len(doc.Devices) != n || len(doc.Conversations) != 0 || len(doc.Messages) != 0 {
		t.Fatalf("the export has %d devices, %d conversations, %d messages; want %d, 0, 0", len(doc.Devices), len(doc.Conversations), len(doc.Messages), n)
	}
	if users != 1 {
		t.Errorf("the export of %d devices without a record read the user %d times, want once (the request's own check)", n, users)
	}
	if simCaps != 1 {
		t.Errorf("the export of %d devices read their SIM caps in %d reads, want one", n, simCaps)
	}

	now := e.clock.Now()
	msgs := make([]store.Message, n)
	for i, d := range devs {
		msgs[i] = store.Message{UUID: fmt.Sprintf("acme-msg-%03d", i), CompanyID: d.CompanyID, Device: d.Fingerprint, Direction: store.Outbound,
			Channel: "sms", Phone: "+15550100001", Text: "hi", SIMSlot: "SIM1", Status: store.MsgDelivered, Segments: 1, CreatedAt: now, UpdatedAt: now}
	}
	if err := e.store.ImportMessages(msgs); err != nil {
		t.Fatal(err)
	}
	users, _, doc = export()
	if len(doc.Conversations) != n || len(doc.Messages) != n {
		t.Fatalf("the export has %d conversations and %d messages, want %d of each", len(doc.Conversations), len(doc.Messages), n)
	}
	if users != 3 {
		t.Errorf("the export of %d conversations and %d messages read the user %d times, want 3 (the request's check, then one per 500 records)", n, n, users)
	}
}
