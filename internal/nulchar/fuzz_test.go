package nulchar

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzParam reads query strings as a request sends them.
func FuzzParam(f *testing.F) {
	for _, s := range []string{"a=x", "b=x%00&a=y&a=z%00", "na%00me=x", "%00=x", "a=1;b", "=&&=%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw)
		name, ok := param(q)
		has := false
		for k, vs := range q {
			has = has || strings.Contains(k, "\x00") || strings.Contains(strings.Join(vs, ""), "\x00")
		}
		if ok != has {
			t.Errorf("param(%q) = %q, %v; a NUL in it: %v", q, name, ok, has)
		}
		if strings.Contains(name, "\x00") || !ok && name != "" {
			t.Errorf("param(%q) = %q, %v", q, name, ok)
		}
		if again, _ := param(q); again != name {
			t.Errorf("param(%q) = %q, then %q", q, name, again)
		}
	})
}
