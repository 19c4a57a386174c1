package media

import (
	"mime"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/simrelay/simrelay/store"
)

// FuzzContentTypeAndName reads what an agent uploads with a file (POST
// /device/media): its declared content type and first bytes, and its
// name. The stored type is on the allowed list, and a type a page shows
// inline is one the bytes sniff as; a name Put takes comes back in
// Content-Disposition as itself (or, where the header cannot carry it, the
// file's id), in a header with no control character to split it.
func FuzzContentTypeAndName(f *testing.F) {
	f.Add("image/png", []byte("\x89PNG\r\n\x1a\n"), "photo.png")
	f.Add("IMAGE/PNG; charset=x", []byte("<script>"), "a.png")
	f.Add("text/plain", []byte("hello"), "notes \"final\".txt")
	f.Add("application/pdf", []byte("%PDF-1.7"), "invoice\u202efdp.exe")
	f.Add("image/jpeg", []byte("\xff\xd8\xff"), "ünïcödé 写真.jpg")
	f.Add("", []byte{}, "")
	f.Add("text/html", []byte("<html>"), "a\r\nSet-Cookie: x=1")
	f.Fuzz(func(t *testing.T, declared string, head []byte, name string) {
		ct := ContentType(declared, head)
		base, _, _ := strings.Cut(ct, ";")
		if !allowed[base] {
			t.Fatalf("ContentType(%q, %q) = %q, not allowed", declared, head, ct)
		}
		if Inline(ct) {
			if sniffed, _, _ := mime.ParseMediaType(http.DetectContentType(head)); sniffed != ct {
				t.Fatalf("ContentType(%q, %q) = %q shown inline, the bytes sniff as %q", declared, head, ct, sniffed)
			}
		}
		if len(name) > MaxFilenameBytes || !utf8.ValidString(name) || strings.IndexFunc(name, badInName) >= 0 {
			return // Put refuses it
		}
		m := store.Media{ID: "med_0123456789abcdef", ContentType: ct, Filename: name}
		h := Disposition(m)
		if strings.ContainsFunc(h, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			t.Fatalf("Disposition of %q = %q holds a control character", name, h)
		}
		kind, params, err := mime.ParseMediaType(h)
		if err != nil {
			t.Fatalf("Disposition of %q = %q does not parse: %v", name, h, err)
		}
		want := name
		if want == "" {
			want = m.ID
		}
		if kind != "attachment" && kind != "inline" || params["filename"] != want && params["filename"] != m.ID {
			t.Fatalf("Disposition of %q = %q reads as %q %q", name, h, kind, params)
		}
	})
}
