package httpapi

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/simrelay/simrelay/problem"
)

// utf8Charsets are the charset parameters a JSON body may declare: JSON
// is UTF-8 (RFC 8259), of which US-ASCII is a part.
var utf8Charsets = map[string]bool{"utf-8": true, "utf8": true, "us-ascii": true, "ascii": true}

// refuseCharset refuses a body whose Content-Type declares a charset
// other than UTF-8 (application/json; charset=iso-8859-1) when the body
// holds a byte past ASCII. The body is read as UTF-8 whatever the header
// says, so such a body's é, a byte that is not UTF-8 in ISO-8859-1, would
// be stored as U+FFFD: the sender is told instead. A body of ASCII bytes
// alone reads the same in every charset a client declares for JSON (many
// HTTP clients' string bodies default to ISO-8859-1), so it is read, as a
// Content-Type without a charset, or none at all, is (the API takes JSON
// whatever the media type). Each value of a repeated header is looked at,
// and the parameters are split by hand, so that one malformed parameter
// does not hide the charset beside it (as mime.ParseMediaType's error
// would).
func refuseCharset(r *http.Request, body []byte) error {
	if ascii(body) {
		return nil
	}
	for _, v := range r.Header.Values("Content-Type") {
		for _, param := range strings.Split(v, ";")[1:] {
			k, cs, ok := strings.Cut(param, "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(k), "charset") {
				continue
			}
			cs = strings.ToLower(strings.Trim(strings.TrimSpace(cs), `"`))
			if !utf8Charsets[cs] {
				return problem.Invalid("Content-Type", "declares a charset other than UTF-8 for a body that holds more than ASCII: send the JSON body in UTF-8 (charset=utf-8, or no charset)")
			}
		}
	}
	return nil
}

// ascii reports whether b holds ASCII bytes alone.
func ascii(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// refuseEncoding refuses a body sent with a content coding
// (Content-Encoding: gzip, br, ...). The server reads the body's bytes as
// JSON as they come; a gzipped body was answered "The request body is not
// valid JSON.", which points at the JSON, not at the compression. identity,
// the coding of no coding, is taken, in any case and in any of the header's
// values.
func refuseEncoding(r *http.Request) error {
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				return problem.Invalid("Content-Encoding", "must be absent (or identity): the server reads the JSON body as it is sent and decodes no gzip or other content coding")
			}
		}
	}
	return nil
}
