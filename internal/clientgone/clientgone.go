// Package clientgone tells a request that ended because its client went
// away from one that failed, for the API (httpapi) and the console (web)
// alike: such a request is recorded 499 and logged at debug, not answered
// 500 and logged as a server failure.
package clientgone

import (
	"context"
	"errors"
	"net/http"
)

// Status is the status recorded for a request whose client went away
// before its answer: nginx's 499, not an HTTP status a client sees. It
// keeps such requests out of the access log's and the metrics' 5xx.
const Status = 499

// Is reports whether err ended r because r's client closed its connection
// while the request waited (on the store, on a link's last seen): a
// cancellation, with r's own context done. A cancellation while the
// client still waits is something else, and a failure.
func Is(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && r.Context().Err() != nil
}
