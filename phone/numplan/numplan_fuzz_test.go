package numplan

import (
	"slices"
	"testing"

	"github.com/nyaruka/phonenumbers"
)

// FuzzNumbers (beside FuzzNormalize, which fuzzes the region's spelling)
// reads numbers as a phone reports them (a sender, its own
// number) in a company's region, through the numbering library: never a
// panic, and what Normalize, Reported and Sender take is E.164 that reads
// again as itself. region picks one of the regions the numbering data
// knows, or none.
func FuzzNumbers(f *testing.F) {
	for _, c := range []struct {
		s      string
		region uint16
	}{
		{"07400 123456", 1}, {"(020) 7946-0958", 1}, {"0044 7400 123456", 1}, {"+44 7400 123456", 1},
		{"(415) 555-0100", 2}, {"07700 9001", 1}, {"07700 9001234567", 1}, {"447400123456", 1},
		{"72345", 1}, {"", 0}, {"BANK", 1}, {"0", 3}, {"0039 06 1234 5678", 4}, {"+", 5}, {"((((", 6},
	} {
		f.Add(c.s, c.region)
	}
	regions := []string{"", "GB", "US", "DE", "IT"}
	for r := range phonenumbers.GetSupportedRegions() {
		if !slices.Contains(regions, r) {
			regions = append(regions, r)
		}
	}
	slices.Sort(regions[5:])
	f.Fuzz(func(t *testing.T, s string, pick uint16) {
		region := regions[int(pick)%len(regions)]
		check := func(what, n string, ok bool) {
			t.Helper()
			if !ok {
				return
			}
			if !e164.MatchString(n) {
				t.Fatalf("%s(%q, %q) = %q, not E.164", what, s, region, n)
			}
			if again, err := Normalize(n, region); err != nil || again != n {
				t.Fatalf("%s(%q, %q) = %q, which normalises to %q, %v", what, s, region, n, again, err)
			}
		}
		n, err := Normalize(s, region)
		check("Normalize", n, err == nil)
		n, err = Reported(s, region)
		check("Reported", n, err == nil)
		n, ok := Sender(s, region)
		check("Sender", n, ok)
	})
}
