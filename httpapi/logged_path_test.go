package httpapi

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzLoggedPath holds loggedPath, which answers a path that cannot name a
// pairing code as it is without reading its segments, to the segments'
// reading of every path: the same logged path for whatever is asked.
func FuzzLoggedPath(f *testing.F) {
	for _, s := range []string{"/chat/send", "/device/pairing/abc123/qr.png", "//device/pairing/ABC123/qr.png", "/device/pairing/abc123/qr.png/",
		"/DEVICE/PAIRING/abc/x", "/device/%70airing/abc", "/device/pa%C4%B1ring/abc", "/device/pairİng/abc", "/a/../device/./pairing/abc",
		"/device/pairing", "/x/device/pairing/abc", "/device/pairing/%zz", "/device/Pairing/ab%2Fc/abc", "/ſ/pairing", "", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, escaped string) {
		if got, want := loggedPath(escaped), loggedPathBySegments(escaped); got != want {
			t.Fatalf("loggedPath(%q) = %q, want %q", escaped, got, want)
		}
	})
}

// loggedPathBySegments is loggedPath reading the segments of every path.
func loggedPathBySegments(escaped string) string {
	decoded, err := url.PathUnescape(escaped)
	if err != nil {
		decoded = escaped
	}
	var segs []string
	for _, seg := range strings.Split(decoded, "/") {
		switch seg {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, seg)
		}
	}
	if len(segs) < 3 || !strings.EqualFold(segs[0], "device") || !strings.EqualFold(segs[1], "pairing") {
		return escaped
	}
	code := strings.ToLower(segs[2])
	asked := strings.Split(escaped, "/")
	for i, seg := range asked {
		if d, err := url.PathUnescape(seg); err == nil {
			seg = d
		}
		if strings.Contains(strings.ToLower(seg), code) {
			asked[i] = "xxxxx"
		}
	}
	return strings.Join(asked, "/")
}
