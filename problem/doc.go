// Package problem is simrelay's error catalog: the stable machine codes of the
// contract's error body and the HTTP status each one answers with.
//
// Domain packages return *Error for failures a client can act on; the HTTP
// layer renders any *Error as {"error", "message", "field"} and every other
// error as a generic 500 whose cause goes only to the log.
package problem
