package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// jsonPath returns the JSON path (owner.password, webhooks[2].sims[0]) of
// the value that ends at offset in data: where encoding/json reports a
// value of the wrong type. It returns "" when it cannot tell.
func jsonPath(data []byte, offset int64) string {
	path := ""
	walkJSON(data, func(at func() string, _ json.Token, end int64) bool {
		if end >= offset {
			path = at()
			return false
		}
		return true
	})
	return path
}

// nulField returns the JSON path of the first string in data that holds
// U+0000, and whether there is one. The NUL character means nothing in a
// message, a name or an address, and PostgreSQL's jsonb (the store of a
// cluster) cannot hold it at all: refused here, it is the client's clear
// 400 on either store, not a 500 on one of them.
func nulField(data []byte) (string, bool) {
	if !bytes.Contains(data, []byte(`\u0000`)) {
		return "", false // the only way a valid JSON text can carry a NUL
	}
	path, found := "", false
	walkJSON(data, func(at func() string, tok json.Token, _ int64) bool {
		if s, ok := tok.(string); ok && strings.IndexByte(s, 0) >= 0 {
			path, found = at(), true
			return false
		}
		return true
	})
	return path, found
}

// holdsNUL reports whether a decoded body holds U+0000 in any string: a
// NUL in a field the body's type does not know was ignored with the field,
// as every unknown field is.
func holdsNUL(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return strings.IndexByte(v.String(), 0) >= 0
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && holdsNUL(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && holdsNUL(v.Field(i)) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if holdsNUL(v.Index(i)) {
				return true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if holdsNUL(it.Key()) || holdsNUL(it.Value()) {
				return true
			}
		}
	}
	return false
}

// walkJSON calls visit with each value (or the start of one) in data, its
// path and the offset where its token ends. Keys are not visited: a key is
// a field's name, and an unknown one is ignored. It stops when visit
// answers false or at the first token it cannot read.
func walkJSON(data []byte, visit func(at func() string, tok json.Token, end int64) bool) {
	type level struct {
		array   bool
		index   int
		key     string
		wantKey bool
	}
	var stack []*level
	advance := func() {
		if n := len(stack); n > 0 {
			if top := stack[n-1]; top.array {
				top.index++
			} else {
				top.wantKey = true
			}
		}
	}
	render := func() string {
		var b strings.Builder
		for _, l := range stack {
			if l.array {
				b.WriteString("[" + strconv.Itoa(l.index) + "]")
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(l.key)
		}
		return b.String()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			if len(stack) == 0 {
				return
			}
			stack = stack[:len(stack)-1]
			advance()
			continue
		}
		if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].wantKey {
			key, _ := tok.(string)
			stack[n-1].key, stack[n-1].wantKey = key, false
			continue
		}
		// tok is a value (or the start of one) at the current path.
		if !visit(render, tok, dec.InputOffset()) {
			return
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &level{array: d == '[', wantKey: d == '{'})
			continue
		}
		advance()
	}
}

// repeatedKey finds an object in data that gives one key twice with
// different values, and answers the second one's JSON path
// (messages[2].phone) and true; the same value twice (byte for byte) means
// one thing and is not reported. With fold, keys are compared as
// encoding/json matches a struct's field, without case (phone, Phone and
// PHONE name one field; so do K and the Kelvin sign, s and the long ſ),
// since that is how the API's bodies are decoded; without it, as written,
// as the MCP transport reads its messages. Either way a key is compared
// decoded ("m\u0065ssage" is "message"). A decoder takes the last of the
// values and drops the others without a word, where a proxy, a log or a
// filter in front may have gone by the first.
//
// data must be valid JSON (the callers have decoded it): this is a scan of
// its bytes, not a parse, a few times cheaper than json.Decoder's tokens.
func repeatedKey(data []byte, fold bool) (string, bool) {
	type entry struct {
		name  string
		value []byte
	}
	type frame struct {
		array   bool
		index   int
		key     string // the current key, decoded
		start   int    // where the current key's value starts; -1 before its colon
		entries []entry
		seen    map[string][]byte // entries, once an object has many
	}
	var stack []*frame
	// done records the value of the current key of the object on top,
	// ending before end, and says whether that key was given before with
	// another value.
	done := func(end int) bool {
		top := stack[len(stack)-1]
		if top.start < 0 {
			return false // an empty object
		}
		value := bytes.TrimRight(data[top.start:end], " \t\r\n")
		name := top.key
		if fold {
			name = foldKey(name)
		}
		if top.seen != nil {
			if earlier, ok := top.seen[name]; ok {
				return !bytes.Equal(earlier, value)
			}
			top.seen[name] = value
			return false
		}
		for _, e := range top.entries {
			if e.name == name {
				return !bytes.Equal(e.value, value)
			}
		}
		top.entries = append(top.entries, entry{name, value})
		if len(top.entries) > 16 {
			top.seen = make(map[string][]byte, 32)
			for _, e := range top.entries {
				top.seen[e.name] = e.value
			}
			top.entries = nil
		}
		return false
	}
	found := false
scan:
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{', '[':
			stack = append(stack, &frame{array: c == '[', start: -1})
		case '}', ']':
			if c == '}' && done(i) {
				found = true
				break scan
			}
			stack = stack[:len(stack)-1]
		case ',':
			top := stack[len(stack)-1]
			if top.array {
				top.index++
				continue
			}
			if done(i) {
				found = true
				break scan
			}
			top.start = -1
		case ':':
			stack[len(stack)-1].start = i + 1
		case '"':
			from, escaped := i, false
			for i++; data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
					escaped = true
				}
			}
			if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].start < 0 {
				key := string(data[from+1 : i])
				if escaped {
					_ = json.Unmarshal(data[from:i+1], &key)
				}
				stack[n-1].key = key
			}
		}
	}
	if !found {
		return "", false
	}
	var b strings.Builder
	for _, f := range stack {
		if f.array {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.key)
	}
	field := b.String()
	if utf8.RuneCountInString(field) > 128 {
		field = string([]rune(field)[:128]) + "…"
	}
	return field, true
}

// foldKey is key with each letter replaced by the least of the letters
// that match it without case (unicode.SimpleFold's orbit), so two keys
// encoding/json would take for one field have one foldKey.
func foldKey(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range key {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}
