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
	// The frames and the keys seen sit in arrays on this function's stack
	// for the bodies the API takes (a few levels, a few keys each): the
	// scan runs on every JSON body and allocates nothing for them. A key
	// is a slice of data, unless it was escaped.
	var frameBuf [8]keyFrame
	var entryBuf [32]keyEntry
	stack, entries := frameBuf[:0], entryBuf[:0]
	found := false
scan:
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{', '[':
			stack = append(stack, keyFrame{array: c == '[', start: -1, first: len(entries)})
		case '}', ']':
			if c == '}' {
				var repeated bool
				if entries, repeated = keyDone(data, &stack[len(stack)-1], entries, i, fold); repeated {
					found = true
					break scan
				}
			}
			entries = entries[:stack[len(stack)-1].first]
			stack = stack[:len(stack)-1]
		case ',':
			top := &stack[len(stack)-1]
			if top.array {
				top.index++
				continue
			}
			var repeated bool
			if entries, repeated = keyDone(data, top, entries, i, fold); repeated {
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
				key := data[from+1 : i]
				if escaped {
					var s string
					_ = json.Unmarshal(data[from:i+1], &s)
					key = []byte(s)
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
		b.Write(f.key)
	}
	field := b.String()
	if utf8.RuneCountInString(field) > 128 {
		field = string([]rune(field)[:128]) + "…"
	}
	return field, true
}

// keyFrame is an object or an array that repeatedKey is inside.
type keyFrame struct {
	array bool
	index int
	key   []byte // the current key, decoded
	start int    // where the current key's value starts; -1 before its colon
	first int    // where this object's keys start in repeatedKey's entries
	seen  map[string][]byte
}

// keyEntry is a key an object gave and its value, as written.
type keyEntry struct {
	name, value []byte
}

// keyDone records the value of top's current key, ending before end, in
// entries (top's own from top.first on), and says whether that key was
// given before with another value. With fold, two keys are one when
// bytes.EqualFold says so: rune by rune in one unicode.SimpleFold orbit,
// which is what foldKey makes equal. An object of more than 16 keys moves
// them to a map by their foldKey.
func keyDone(data []byte, top *keyFrame, entries []keyEntry, end int, fold bool) ([]keyEntry, bool) {
	if top.start < 0 {
		return entries, false // an empty object
	}
	value := bytes.TrimRight(data[top.start:end], " \t\r\n")
	if top.seen != nil {
		name := string(top.key)
		if fold {
			name = foldKey(name)
		}
		if earlier, ok := top.seen[name]; ok {
			return entries, !bytes.Equal(earlier, value)
		}
		top.seen[name] = value
		return entries, false
	}
	for _, e := range entries[top.first:] {
		if fold && bytes.EqualFold(e.name, top.key) || !fold && bytes.Equal(e.name, top.key) {
			return entries, !bytes.Equal(e.value, value)
		}
	}
	entries = append(entries, keyEntry{top.key, value})
	if len(entries)-top.first > 16 {
		top.seen = make(map[string][]byte, 32)
		for _, e := range entries[top.first:] {
			name := string(e.name)
			if fold {
				name = foldKey(name)
			}
			top.seen[name] = e.value
		}
		entries = entries[:top.first]
	}
	return entries, false
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
