package httpapi

import "testing"

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
