package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// jsonPath returns the JSON path (owner.password, webhooks[2].sims[0]) of
// the value that ends at offset in data: where encoding/json reports a
// value of the wrong type. It returns "" when it cannot tell.
func jsonPath(data []byte, offset int64) string {
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
			return ""
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			if len(stack) == 0 {
				return ""
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
		if dec.InputOffset() >= offset {
			return render()
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &level{array: d == '[', wantKey: d == '{'})
			continue
		}
		advance()
	}
}
