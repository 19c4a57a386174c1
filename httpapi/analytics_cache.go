package httpapi

import (
	"strconv"
	"sync"
)

// Bounds of the analytics answers kept for reuse (answerCache).
const (
	// maxCachedAnswers is how many answers the server keeps at once.
	maxCachedAnswers = 64
	// maxCachedBytes bounds their bytes together: a fleet's answer, with
	// byDevice listing 10,000 phones, is about 1.4 MB.
	maxCachedBytes = 8 << 20
)

// answerCache keeps encoded analytics answers for as long as the store has
// not been written since they were read (boltstore.Store.Generation): a fleet's
// answer takes milliseconds to read and encode, and a dashboard asks for the
// same one again and again while nothing changes. Answers are kept by
// company and request, so one company never gets another's; every write to
// the store, whoever made it, retires them all, since the generation is the
// store's.
type answerCache struct {
	mu    sync.Mutex
	gen   uint64
	bytes int
	items map[string][]byte
}

// answerKey names an analytics request of a company: its range and its
// filters as the client wrote them, joined with NUL, which no query value
// holds (refuseUnstorable): a separator a filter may hold ("|") let
// users=1|x name the answer of users=1 and devices=x|, and so be answered
// before its filter was read.
func answerKey(company uint64, from, to, users, devices string) string {
	return strconv.FormatUint(company, 10) + "\x00" + from + "\x00" + to + "\x00" + users + "\x00" + devices
}

// get returns the answer kept for key at generation gen, nil when none is.
func (c *answerCache) get(gen uint64, key string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return nil
	}
	return c.items[key]
}

// put keeps body, read after generation gen, unless newer answers are kept
// already or it would pass the bounds. body must not change afterwards.
func (c *answerCache) put(gen uint64, key string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case gen < c.gen:
		return
	case gen > c.gen || c.items == nil:
		c.gen, c.bytes, c.items = gen, 0, map[string][]byte{}
	}
	if _, ok := c.items[key]; ok || len(c.items) >= maxCachedAnswers || c.bytes+len(body)+len(key) > maxCachedBytes {
		return
	}
	c.items[key] = body
	c.bytes += len(body) + len(key)
}
