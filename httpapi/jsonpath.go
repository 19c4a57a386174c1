package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
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
