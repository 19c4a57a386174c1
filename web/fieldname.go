package web

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// fieldName is how a person reads a form field's name in an error message:
// "owner.password" is "Password", "sms_per_minute" "SMS per minute",
// "optOutKeywords" "Opt out keywords", "gap_seconds.max" "Gap seconds (max)",
// "members[3]" "Members (item 4)".
// The API names the field by its path; the console's banner and the text
// beside the field are read by people, who never see that path.
func fieldName(field string) string {
	parts := strings.FieldsFunc(field, func(r rune) bool { return r == '.' || r == '[' || r == ']' })
	if len(parts) == 0 {
		return "This field"
	}
	last := words(parts[len(parts)-1])
	if len(parts) > 1 && (parts[len(parts)-1] == "min" || parts[len(parts)-1] == "max") {
		last = append(words(parts[len(parts)-2]), "("+parts[len(parts)-1]+")")
	}
	// A list's item ("members[3]") is named by its list and its place,
	// counted from one as people count: "Members (item 4)", not "3".
	if n, err := strconv.Atoi(parts[len(parts)-1]); err == nil && n >= 0 && len(parts) > 1 {
		last = append(words(parts[len(parts)-2]), "(item "+strconv.Itoa(n+1)+")")
	}
	if len(last) == 0 {
		return "This field"
	}
	for i, w := range last {
		if up, ok := spelled[w]; ok {
			last[i] = up
		}
	}
	r, n := utf8.DecodeRuneInString(last[0])
	last[0] = string(unicode.ToUpper(r)) + last[0][n:]
	return strings.Join(last, " ")
}

// spelled are the words of field names written otherwise in prose.
var spelled = map[string]string{"sms": "SMS", "sim": "SIM", "sims": "SIMs", "url": "URL", "id": "ID", "im": "iMessage", "wa": "WhatsApp"}

// words splits a snake_case or camelCase name into lower-case words.
func words(name string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = cur[:0]
		}
	}
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || unicode.IsSpace(r):
			flush()
		case unicode.IsUpper(r):
			flush()
			cur = append(cur, unicode.ToLower(r))
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return out
}
