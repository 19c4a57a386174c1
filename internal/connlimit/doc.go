// Package connlimit bounds the connections a listener holds open: per client
// address (an IPv6 client is its /64, as in the rate limits) and, where the
// caller asks, in all. Both of the server's listeners sit behind it.
//
// The HTTP server's timeouts bound how long each connection lives (10 s for
// a request's header, a minute for its body, two minutes idle between
// requests), but not how many one client opens: without a bound, one address
// could hold every file descriptor the process may open with idle keep-alive
// connections, and no phone, browser or API client could connect any more.
// The e-mail to SMS listener bounds its connections in all as well, since each
// holds a goroutine and up to a mail's size while its text is read, and it
// remembers them, so that a shutdown can cut those still open at its deadline.
//
// A connection over a bound is answered in its protocol before it is closed
// (the caller's Config.Refuse: HTTP's 429, SMTP's 421), so that a client sees
// why rather than a reset, and Accept waits for the next one.
package connlimit
