// Package gateway is the connection hub: phones hold one WebSocket each to
// it, and it carries jobs to them and their reports back.
//
// Shape (after tailscale's derp server and centrifuge): the device token is
// checked before the upgrade; the phone's hello must come within a deadline;
// the token and status are checked again once the link is registered, and
// only then is the older link of the device closed (4009) and the welcome
// sent. Each link has one reader goroutine; its one writer goroutine runs
// only while frames wait, and everything bound for the phone goes through a
// bounded queue whose enqueue never blocks: a phone that cannot keep up is
// closed with 4008 and resyncs from the store when it comes back. The
// reader hands reports to the store's group commit and reads on; an
// answerer goroutine, also running only while answers wait, acknowledges
// them in order once durable (answers.go). Between frames the reader waits
// outside the WebSocket library, on a small stack (buffers.go). Liveness
// is a jittered ping from a timer, written between the library's frames,
// its pong taken by that wait; not read deadlines. Nothing that can
// block (network, store) runs under the hub's lock; recipients are
// snapshotted under it and acted on outside. Shutdown tells every phone to
// come back (4012) and waits for every link goroutine.
package gateway
