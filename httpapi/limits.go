package httpapi

import (
	"time"

	"github.com/simrelay/simrelay/pacing"
)

// The API's rate limits, for the server's other listeners (the SMTP
// listener): a credential's sends and a client address's credential tries
// count in the same windows whichever door they came through, so a second
// door never doubles a limit.

// addressKey is a client address's key in the windows, as limit counts it.
func addressKey(ip string) string { return "ip:" + pacing.ClientKey(ip) }

// CountRequest counts one request of a credential's identity
// (account.Principal.Identity) in the general window, as a call to a
// counted route would.
func (s *Server) CountRequest(identity string) pacing.Result { return s.members.Take(identity) }

// CredentialsSpent reports whether the client address has no credential
// try left in the auth scope's window (--rate-auth), and until when; it
// counts nothing.
func (s *Server) CredentialsSpent(ip string) (bool, time.Duration) {
	return s.auth.Spent(addressKey(ip))
}

// CountCredentialFailure counts a failed credential try of the client
// address in the auth scope's window.
func (s *Server) CountCredentialFailure(ip string) pacing.Result {
	return s.auth.Take(addressKey(ip))
}
