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
			if got, ok := Repeated(q, nil); got != want || ok != (want != "") {
				t.Fatalf("%q: got %q, %v; want %q", raw, got, ok, want)
			}
		}
	}
}

// A name read as a list may repeat; the next one at fault is named.
func TestRepeatedLists(t *testing.T) {
	q, _ := url.ParseQuery("b=1&b=2&members=x&members=y&z=1&z=2")
	list := func(name string) bool { return name == "b" || name == "members" }
	for range 20 {
		if got, ok := Repeated(q, list); got != "z" || !ok {
			t.Fatalf("got %q, %v; want z", got, ok)
		}
	}
	q, _ = url.ParseQuery("members=x&members=y")
	if got, ok := Repeated(q, list); ok {
		t.Fatalf("a list alone: got %q", got)
	}
}
