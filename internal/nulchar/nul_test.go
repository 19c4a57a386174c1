package nulchar

import (
	"net/url"
	"testing"
)

func TestParam(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		q      url.Values
		want   string
		wantOK bool
	}{
		{url.Values{"a": {"x"}}, "", false},
		{url.Values{"b": {"x\x00"}, "a": {"y", "z\x00"}}, "a", true},
		{url.Values{"na\x00me": {"x"}}, "name", true},
		{url.Values{"\x00": {"x"}}, "", true},
	} {
		got, ok := Param(tt.q)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Param(%q) = %q, %v; want %q, %v", tt.q, got, ok, tt.want, tt.wantOK)
		}
	}
}
