package httpapi

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"

	"github.com/simrelay/simrelay/problem"
)

// connRefusal is the whole HTTP answer to a connection refused before any
// request is read, over the server's bound of connections per client address
// (internal/connlimit): a client sees the contract's 429 rate_limited rather
// than a reset.
var connRefusal = func() []byte {
	body, err := json.Marshal(problem.New(problem.RateLimited, "Too many connections from this address at once; close some and try again."))
	if err != nil {
		panic(err) // a fixed value that marshals
	}
	return []byte("HTTP/1.1 " + strconv.Itoa(http.StatusTooManyRequests) + " " + http.StatusText(http.StatusTooManyRequests) + "\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + string(body))
}()

// RefuseConnection writes the answer to a connection over the bound of
// connections per client address; cmd/simrelay hands it to the bound
// (connlimit.Config.Refuse), which sets the write's deadline and closes the
// connection after it.
func RefuseConnection(c net.Conn) { _, _ = c.Write(connRefusal) }
