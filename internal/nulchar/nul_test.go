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
		got, ok := param(tt.q)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("param(%q) = %q, %v; want %q, %v", tt.q, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestAddress: the one check the API and the console make of a request's
// address (Path, then Values when it has a query), in the order both
// answer: the path before the query, a NUL before bytes that are not
// UTF-8, parameters by name.
func TestAddress(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		raw    string
		want   Fault
		wantOK bool
	}{
		{"/chat/queue/a?device_fingerprint=x", Fault{}, false},
		{"/chat/queue/a%2500?q=%2500", Fault{}, false}, // %00 as text is only text
		{"/chat/queue/a%00", Fault{Part: InPath, Cause: NUL}, true},
		{"/chat/queue/a%FF", Fault{Part: InPath, Cause: NotText}, true},
		{"/chat/queue/%ED%A0%80", Fault{Part: InPath, Cause: NotText}, true}, // a lone surrogate
		{"/a%FF%00", Fault{Part: InPath, Cause: NUL}, true},
		{"/a%00?phone=%00", Fault{Part: InPath, Cause: NUL}, true},
		{"/a%FF?phone=%00", Fault{Part: InPath, Cause: NotText}, true},
		{"/a?phone=%2B1555%00", Fault{Part: InParam, Cause: NUL, Param: "phone"}, true},
		{"/a?x%00=1", Fault{Part: InParam, Cause: NUL, Param: "x"}, true},
		{"/a?phone=%FF%FE", Fault{Part: InParam, Cause: NotText, Param: "phone"}, true},
		{"/a?x%FF=1", Fault{Part: InParam, Cause: NotText, Param: "x\uFFFD"}, true},
		{"/a?s=%ED%B0%80", Fault{Part: InParam, Cause: NotText, Param: "s"}, true},
		// A NUL anywhere is named before bad bytes anywhere, then by name.
		{"/a?a=%FF&b=%00", Fault{Part: InParam, Cause: NUL, Param: "b"}, true},
		{"/a?b=%FF&a=%FF", Fault{Part: InParam, Cause: NotText, Param: "a"}, true},
	} {
		u, err := url.Parse(tt.raw)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := Path(u.Path)
		if !ok && u.RawQuery != "" {
			got, ok = Values(u.Query())
		}
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: = %+v, %v; want %+v, %v", tt.raw, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestMessage: the API's words, which the console's forms answer in too.
func TestMessage(t *testing.T) {
	t.Parallel()
	if got, want := (Fault{Part: InParam, Cause: NUL}).Message(), `must not hold the NUL character (\u0000)`; got != want {
		t.Errorf("NUL: %q, want %q", got, want)
	}
	if got, want := (Fault{Part: InParam, Cause: NotText}).Message(), "must be UTF-8 text"; got != want {
		t.Errorf("NotText: %q, want %q", got, want)
	}
}
