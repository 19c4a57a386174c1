// Package client is the reference phone: a faithful implementation of
// PROTOCOL.md in Go. It registers with a pairing code, keeps one link to the
// hub with reconnects (exponential backoff with full jitter), answers every
// send with an ack after journaling it (a resent job is acked again, never
// delivered twice), resends its un-acknowledged reports and inbound messages
// after each reconnect, and stops for good on a do-not-reconnect close code.
//
// It is the virtual phone of `simrelay phone`, of the tests and of the load
// harness; an Android implementation follows the same rules.
package client
