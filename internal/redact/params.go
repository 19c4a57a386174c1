package redact

import "strings"

// maskParams masks the value of every password parameter in s, written as
// a URL's query writes one (?sslmode=verify-full&password=s3cret) or as
// libpq's keyword/value string does (host=db password='s3 cret'). It reads
// keys and values as liberally as pgx (and libpq) do, since whatever they
// take as the password must not be shown:
//
//   - A key is percent-decoded and its spaces trimmed before it is
//     compared (pass%77ord=, %70assword=, "password =" are all the
//     password), and compared without case (pgx's keys have one, but
//     PASSWORD= is masked all the same: too much, never too little).
//     Every key that ends in "password" is a secret: sslpassword (the
//     client key's passphrase) too.
//   - In libpq's string a value starts after the spaces that follow '='
//     and runs to the next unescaped space; a quoted one ('s3 cret', with
//     \' and \\ inside) to its closing quote, or to the end when there is
//     none. '&' is a value's own there: password=a&b is a&b.
//   - In a URL (query true) a value runs from the '=' to the next '&' or
//     the end, whatever it holds: pgx reads quotes there as the value's
//     own (?password='x'y is the password 'x'y), and a space, which it
//     refuses, is still the operator's password when the refused string
//     is shown. A '#' does not end it either: masking the fragment too is
//     more than pgx reads, never less.
func maskParams(s string, query bool) string {
	var b strings.Builder
	written := 0 // s[:written] is in b
	for i := 0; i < len(s); i++ {
		if s[i] != '=' || !secretKey(keyBefore(s, i)) {
			continue
		}
		start, end := valueSpan(s, i+1, query)
		b.WriteString(s[written:start])
		b.WriteString(Mask)
		written = end
		i = end - 1
	}
	if written == 0 {
		return s
	}
	b.WriteString(s[written:])
	return b.String()
}

// isSpace is libpq's set of spaces between keyword/value pairs.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// keyBefore is the key of the '=' at s[eq]: the text before it back to a
// '?', '&', '=', space or the start, spaces before the '=' skipped.
func keyBefore(s string, eq int) string {
	end := eq
	for end > 0 && isSpace(s[end-1]) {
		end--
	}
	start := end
	for start > 0 {
		c := s[start-1]
		if c == '?' || c == '&' || c == '=' || isSpace(c) {
			break
		}
		start--
	}
	return s[start:end]
}

// secretKey reports whether a parameter key, as written, names a secret.
func secretKey(raw string) bool {
	k := strings.ToLower(strings.TrimSpace(percentDecode(raw)))
	return strings.HasSuffix(k, "password")
}

// percentDecode decodes every %XX of s; a '%' not followed by two hex
// digits stays as it is (pgx refuses such a key, so it names no secret).
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// valueSpan is where the value that follows an '=' (s[from-1]) starts and
// ends: see maskParams.
func valueSpan(s string, from int, query bool) (start, end int) {
	if query {
		if amp := strings.IndexByte(s[from:], '&'); amp >= 0 {
			return from, from + amp
		}
		return from, len(s)
	}
	start = from
	for start < len(s) && isSpace(s[start]) {
		start++
	}
	quoted := start < len(s) && s[start] == '\''
	end = start
	if quoted {
		end++
	}
	for end < len(s) {
		c := s[end]
		switch {
		case c == '\\':
			end++ // the escaped byte is the value's, whatever it is
		case quoted && c == '\'':
			return start, end + 1
		case !quoted && isSpace(c):
			return start, end
		}
		end++
	}
	return start, len(s)
}
