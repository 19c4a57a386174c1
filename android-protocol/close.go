package androidproto

// Close codes. 4000-4499 (and 1001) mean: reconnect with backoff.
// 4500-4999 mean: do not reconnect until the user acts.
const (
	CloseGoingAway      = 1001 // the server is going away; reconnect with backoff
	CloseMessageTooBig  = 1009 // a frame over MaxFrameBytes; a bug in the phone: reconnect with backoff
	CloseInternalError  = 1011 // a fault of the server while storing hello or a report; reconnect with backoff
	CloseTryAgainLater  = 1013 // the server's database does not answer; reconnect within seconds (PROTOCOL.md section 14)
	CloseProtocolError  = 4000 // a malformed or out-of-order frame (no hello first, bad JSON)
	CloseHelloTimeout   = 4001 // no hello within the hello timeout
	CloseTooSlow        = 4008 // the phone read too slowly and its queue overflowed; resync after reconnect
	CloseReplaced       = 4009 // a newer connection of the same device took over
	CloseRestarting     = 4012 // the server is restarting; come back shortly
	CloseFlood          = 4029 // too many frames too fast
	CloseBadToken       = 4501 // the device token is invalid or was revoked (re-registered elsewhere)
	CloseDeviceGone     = 4503 // the device was deleted or disabled
	CloseUnsupportedVer = 4510 // the protocol version in hello is not supported
)

// ShouldReconnect reports whether a phone should reconnect (with backoff)
// after the server closed with code. Codes outside both ranges, and abnormal
// closures with no code at all, are network trouble: reconnect.
func ShouldReconnect(code int) bool {
	return !(code >= 4500 && code <= 4999)
}
