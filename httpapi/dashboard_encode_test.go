package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// TestAnalyticsAnswerEncodesAsEncodingJSON: the analytics answer, written
// without reflection, is byte for byte what encoding/json (as Echo's c.JSON
// runs it) makes of the same answer, names that need escaping included.
func TestAnalyticsAnswerEncodesAsEncodingJSON(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 2, 27, 0, 0, 0, 0, time.UTC)
	st := store.Stats{
		Totals: store.Counts{Sent: 1 << 40, Delivered: 7, Failed: 1, Received: 12, Expired: 2, Segments: 9},
		Days:   []store.Counts{{Sent: 1}, {}, {Received: 18446744073709551615}, {Failed: 3, Expired: 4}},
	}
	var devices []byDeviceJSON
	for i, name := range []string{"Pixel 7", `say "hi"`, `back\slash`, "<b>&amp;</b>", "tab\tnew\nline\x01", "Zoë's phone ☎",
		"bad \xff\xfe utf-8", "line\u2028sep\u2029", "", "\x7f"} {
		devices = append(devices, byDeviceJSON{DeviceFingerprint: "fp-" + name, DeviceName: name,
			countsJSON: countsJSON{Sent: uint64(i), Delivered: uint64(i * 2), Failed: 1, Received: uint64(i * 1000), Expired: uint64(i % 2)}})
	}
	for _, tc := range []struct {
		name    string
		devices []byDeviceJSON
		days    []store.Counts
	}{{"devices", devices, st.Days}, {"no devices", []byDeviceJSON{}, st.Days}, {"one day", devices[:1], st.Days[:1]}} {
		st := st
		st.Days = tc.days
		to := from.AddDate(0, 0, len(tc.days)-1)
		type seriesJSON struct {
			Date string `json:"date"`
			countsJSON
		}
		series := []seriesJSON{}
		for i, d := range st.Days {
			series = append(series, seriesJSON{Date: from.AddDate(0, 0, i).Format(dateLayout), countsJSON: countsOut(d)})
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(map[string]any{
			"from": from.Format(dateLayout), "to": to.Format(dateLayout),
			"totals": countsOut(st.Totals), "series": series, "byDevice": tc.devices,
		}); err != nil {
			t.Fatal(err)
		}
		if got := appendAnalytics(nil, from, to, st, tc.devices); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: wrote\n%s\nencoding/json writes\n%s", tc.name, got, want.Bytes())
		}
	}
}
