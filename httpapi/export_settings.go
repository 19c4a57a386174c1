package httpapi

import (
	androidproto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/store"
)

// The company's routing settings in its export (docs/routing.md): its sender
// pools and the caps set on its SIMs. Both are bounded (store.MaxPools pools
// of store.MaxPoolMembers members; two SIMs a device), so they are read with
// the other small parts, before the status is sent.

// exportSIMCapsJSON is one device's SIM caps as GET /device/{fp}/caps shows
// them, less their live use (sent_today, sent_this_month, recipients_today),
// with the device named: each entry, less its device_fingerprint, is a body
// PUT /device/{fp}/caps takes back. Only the SIMs with a cap are listed.
type exportSIMCapsJSON struct {
	DeviceFingerprint string             `json:"device_fingerprint"`
	SIMs              []exportSIMCapJSON `json:"sims"`
}

type exportSIMCapJSON struct {
	Slot             string `json:"slot"`
	PerDay           *int64 `json:"per_day"`
	PerMonth         *int64 `json:"per_month"`
	RecipientsPerDay *int64 `json:"recipients_per_day"`
}

// exportSettings is what the export holds of the company's routing
// settings; an empty part is left out of the document.
type exportSettings struct {
	pools   []poolJSON
	simCaps []exportSIMCapsJSON
}

// readExportSettings reads the company's pools and the caps of its live
// devices' SIMs (devices, as the export lists them), the caps of all its
// devices in one read. A device deleted since that list was read is left
// out, as the list would leave it (its caps went with it, and it left its
// pools), and so is one registered since, which the list does not hold.
func (s *Server) readExportSettings(cid uint64, devices []store.Device) (exportSettings, error) {
	var out exportSettings
	st := s.deps.Store
	pools, err := st.Pools(cid)
	if err != nil {
		return out, err
	}
	for _, p := range pools {
		out.pools = append(out.pools, poolOut(p))
	}
	caps, err := st.CompanySIMCaps(cid)
	if err != nil {
		return out, err
	}
	for _, d := range devices {
		var sims []exportSIMCapJSON
		for _, slot := range androidproto.SIMSlots() {
			c, ok := caps[d.ID][slot]
			if !ok || c == (store.SIMCaps{}) {
				continue
			}
			sims = append(sims, exportSIMCapJSON{Slot: slot, PerDay: capOrNull(c.PerDay), PerMonth: capOrNull(c.PerMonth),
				RecipientsPerDay: capOrNull(c.RecipientsPerDay)})
		}
		if len(sims) > 0 {
			out.simCaps = append(out.simCaps, exportSIMCapsJSON{DeviceFingerprint: d.Fingerprint, SIMs: sims})
		}
	}
	return out, nil
}

// write writes the settings as "pools" and "sim_caps", each only when the
// company has one.
func (x exportSettings) write(w *exportWriter) {
	if len(x.pools) > 0 {
		w.raw(`,"pools":`)
		w.value(x.pools)
	}
	if len(x.simCaps) > 0 {
		w.raw(`,"sim_caps":`)
		w.value(x.simCaps)
	}
}
