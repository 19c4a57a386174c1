package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRepeatedKeyScan: the byte scan of repeatedKey finds the keys a
// decoder sees (escaped ones decoded; braces, commas, colons and quotes
// inside strings are text), in objects at any depth and in arrays, and
// names the repeated one's path.
func TestRepeatedKeyScan(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		data  string
		fold  bool
		field string
	}{
		{`{"a":1,"b":2}`, true, ""},
		{`{"a":1,"a":2}`, true, "a"},
		{`{"a":1,"a":1}`, true, ""},
		{`{"a" : 1 , "a" : 1 }`, true, ""},
		{`{"a":{"x":1},"a":{"x":1}}`, true, ""},
		{`{"a":{"x":1},"a":{"x":2}}`, true, "a"},
		{`{"a":{"x":1,"x":2}}`, true, "a.x"},
		{`{"a":"{\"a\":1,","a\"":"}","b":[1,{"c":":","c":","}]}`, true, "b[1].c"},
		{`{"l":[[],{},[{"k":1},{"k":2,"K":3}]]}`, true, "l[2][1].K"},
		{`{"l":[[],{},[{"k":1},{"k":2,"K":3}]]}`, false, ""},
		{`{"message":"x","m\u0065ssage":"y"}`, false, "message"},
		{`{"s":1,"ſ":2}`, true, "ſ"},
		{`{"s":1,"ſ":2}`, false, ""},
		{`{"k":1,"\u212a":2}`, true, "\u212a"},
		{`{"\\":1,"\\":2}`, false, `\`},
		{`[{"a":1},{"a":2}]`, true, ""},
		{`"a"`, true, ""},
		{`{}`, true, ""},
		{`{"a":[],"a":[ ]}`, true, "a"},
	} {
		got, ok := repeatedKey([]byte(c.data), c.fold)
		if ok != (c.field != "") || got != c.field {
			t.Errorf("repeatedKey(%s, fold %v) = %q, %v; want %q", c.data, c.fold, got, ok, c.field)
		}
	}
}

// TestRepeatedKeyScanAllocates: the scan of a body the API takes, a send's
// or a bulk send's, allocates nothing; it runs on every JSON body. (A key
// written with an escape is decoded, which allocates.)
func TestRepeatedKeyScanAllocates(t *testing.T) {
	for _, body := range []string{
		`{"device_fingerprint":"a-phone","phone":"+15551234567","message":"Your code is 123456","sim_slot":"SIM1"}`,
		`{"messages":[{"phone":"+15551234567","message":"a"},{"phone":"+15551234568","message":"b","Message":"b"}],"sim_slot":"SIM1"}`,
	} {
		data := []byte(body)
		for _, fold := range []bool{true, false} {
			if n := testing.AllocsPerRun(100, func() { repeatedKey(data, fold) }); n != 0 {
				t.Errorf("repeatedKey(%s, fold %v): %v allocations, want 0", body, fold, n)
			}
		}
	}
}

// FuzzRepeatedKeyScan: the scan answers as the one that kept every key by
// its foldKey in a map of its own per object (repeatedKeyByMap), for any
// valid JSON.
func FuzzRepeatedKeyScan(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"x":1,"x":2}}`, `{"s":1,"ſ":2}`, `{"k":1,"\u212a":2}`, `{"K":1,"k":1}`,
		`{"l":[[],{},[{"k":1},{"k":2,"K":3}]]}`, `{"message":"x","m\u0065ssage":"y"}`, `{"\\":1,"\\":2}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"A":19}`,
		`[{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":{"j":1,"J":2}}}}}}}}}}]`, "{\"\xff\":1,\"\xfe\":2}",
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, fold bool) {
		if !json.Valid(data) {
			return
		}
		got, ok := repeatedKey(data, fold)
		want, wantOK := repeatedKeyByMap(data, fold)
		if got != want || ok != wantOK {
			t.Fatalf("repeatedKey(%q, fold %v) = %q, %v; the map's scan %q, %v", data, fold, got, ok, want, wantOK)
		}
	})
}

// repeatedKeyByMap is repeatedKey as it was before its keys stayed on the
// stack: each key a string (through foldKey with fold), each object's
// entries a slice of its own.
func repeatedKeyByMap(data []byte, fold bool) (string, bool) {
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
