package postgres

import (
	"testing"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// openConformance opens a store on a new database for one conformance case.
func openConformance[S any](t *testing.T) S {
	return any(openStore(t, Options{})).(S)
}

// openBudgeted opens a store with the media suites' daily storage budget.
func openBudgeted[S any](t *testing.T) S {
	return any(openStore(t, Options{CompanyDailyStorage: conformance.MediaBudget})).(S)
}

// TestConformance runs the suites of package conformance on PostgreSQL,
// each registered once this backend answers all of its methods.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("Webhooks", func(t *testing.T) {
		t.Parallel()
		conformance.Webhooks(t, func(t *testing.T) conformance.WebhooksStore { return deviceTx{openStore(t, Options{})} })
	})
	t.Run("Mail", func(t *testing.T) { t.Parallel(); conformance.Mail(t, openConformance[conformance.MailStore]) })
	t.Run("Media", func(t *testing.T) { t.Parallel(); conformance.Media(t, openBudgeted[conformance.MediaStore]) })
}

// deviceTx lends the webhooks suite the transaction its events join, a
// write that locks the device's row as UpdateDeviceWith does, until the
// devices' UpdateDeviceWith is on this backend: then the suite takes the
// store itself and this goes.
type deviceTx struct{ *Store }

func (s deviceTx) UpdateDeviceWith(companyID, deviceID uint64, fn func(tx store.WriteTx, d *store.Device) error) (store.Device, error) {
	var d store.Device
	err := s.write("update device", func(t *txn) error {
		var err error
		if d, err = liveDeviceByID(t, companyID, deviceID, true); err != nil {
			return err
		}
		return fn(t, &d)
	})
	return d, err
}
