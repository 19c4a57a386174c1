package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
)

// listWriters are the buffers of the list answers being written (writeList).
var listWriters = sync.Pool{New: func() any {
	w := &listWriter{buf: bufio.NewWriterSize(nil, listChunk)}
	w.enc = json.NewEncoder(&w.item)
	return w
}}

// listChunk is how much of a list answer is gathered before it is written
// to the connection.
const listChunk = 32 << 10

// listItemKept is the largest item buffer a listWriter keeps for the next
// answer: an item (a message of 10,000 characters) is at most about 60 KB
// of JSON, so a larger buffer is dropped rather than kept idle.
const listItemKept = 256 << 10

// listWriter writes one list answer: buf gathers it for the connection,
// item holds the JSON of one item, written by enc.
type listWriter struct {
	buf  *bufio.Writer
	item bytes.Buffer
	enc  *json.Encoder
}

// writeList answers 200 with a JSON list, an item at a time: open, the
// items (each item(v) marshalled on its own, comma-separated), close, and
// the newline c.JSON ends with: the bytes c.JSON writes of the whole value
// (its maps' keys in order, HTML characters escaped), as the same
// application/json. c.JSON (encoding/json's Encoder) marshals the whole
// answer into one buffer before it writes any of it, and lets it grow by
// doubling: a page of 100 messages of 10,000 characters is 4 MB of text
// read from the store, answered as 4 to 6 MB of JSON (a '<' is written
// \u003c), which took as much again and more, held until the client took
// the answer. Here the answer is never whole in memory: the texts read and
// a 32 KiB buffer. An answer of at most 2 KiB is still written in one
// piece, so net/http still gives it its Content-Length; a larger one was
// chunked with c.JSON too (net/http sets the length only of what fits in
// its 2 KiB buffer before the handler returns).
//
// A failed write (the client went away) ends the answer; the error is
// returned for renderError, which logs it, the answer having begun.
func writeList[T, J any](c echo.Context, open string, items []T, item func(T) J, close string) error {
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	res.WriteHeader(http.StatusOK)
	w := listWriters.Get().(*listWriter)
	defer func() {
		w.buf.Reset(nil)
		w.item.Reset()
		if w.item.Cap() <= listItemKept {
			listWriters.Put(w)
		}
	}()
	w.buf.Reset(res)
	w.buf.WriteString(open)
	for i, v := range items {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		w.item.Reset()
		if err := w.enc.Encode(item(v)); err != nil {
			return err
		}
		// Without the newline Encode ends each value with.
		if _, err := w.buf.Write(w.item.Bytes()[:w.item.Len()-1]); err != nil {
			return err
		}
	}
	w.buf.WriteString(close)
	w.buf.WriteByte('\n')
	return w.buf.Flush()
}
