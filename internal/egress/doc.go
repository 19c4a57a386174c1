// Package egress decides which addresses simrelay may connect to on a
// customer's word: the webhook receivers the server posts to, and the
// media_url files an agent downloads. Only the public unicast Internet is
// allowed unless an operator opts out (--webhook-allow-private on the
// server, --media-allow-private on the agent).
//
// Two checks, because a name can hide an address: Host refuses a URL's host
// that is a non-public address by itself (an IP literal, localhost), so a
// request naming one is refused when it is made (400); Control, a
// net.Dialer's Control, refuses the address actually dialled, after DNS
// resolution, so a name that resolves (or later rebinds) to an internal
// address reaches nothing. A client using Control must not use a proxy: a
// proxy would dial for it, past the check.
package egress
