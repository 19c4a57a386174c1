package store

import "testing"

// TestParseID: an id as the API writes it, decimal without leading zeros,
// and NoID for everything else.
func TestParseID(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]uint64{
		"1": 1, "10": 10, "18446744073709551614": 18446744073709551614,
		"": NoID, "0": NoID, "00": NoID, "01": NoID, "007": NoID, "0010": NoID, "+1": NoID, "-1": NoID, " 1": NoID,
		"1 ": NoID, "1e3": NoID, "0x10": NoID, "1_000": NoID, "abc": NoID, "18446744073709551616": NoID,
		"١": NoID,
	} {
		if got := ParseID(s); got != want {
			t.Errorf("ParseID(%q) = %d, want %d", s, got, want)
		}
	}
}
