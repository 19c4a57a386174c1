package nulchar

import (
	"net/url"
	"testing"
)

// Repeated names the first parameter, by name, given twice with different
// values, whatever the map's order; the same value twice is no repeat.
func TestRepeated(t *testing.T) {
	for raw, want := range map[string]string{
		"a=1&b=2":             "",
		"a=1&a=1":             "",
		"z=1&z=2&b=1&b=2&c=3": "b",
		"a=1&a=":              "a",
		"":                    "",
	} {
		q, _ := url.ParseQuery(raw)
		for range 20 { // map order varies from call to call
			if got, ok := Repeated(q); got != want || ok != (want != "") {
				t.Fatalf("%q: got %q, %v; want %q", raw, got, ok, want)
			}
		}
	}
}
