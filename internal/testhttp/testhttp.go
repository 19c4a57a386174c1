// Package testhttp is for tests: an HTTP client whose connections are the
// tests' own. httptest.Server's Close closes http.DefaultTransport's idle
// connections, whichever server they lead to, and so does a
// CloseIdleConnections on http.DefaultClient; a request of a test running
// in parallel that is about to go out on one of them can fail, and a POST,
// PUT, PATCH or DELETE is not sent again. Tests send through Client (or a
// client of their own on Transport) rather than http.DefaultClient,
// http.Get, http.Post or a client without a Transport.
package testhttp

import "net/http"

// Transport is http.DefaultTransport's settings on a pool of its own.
var Transport = http.DefaultTransport.(*http.Transport).Clone()

// Client is http.DefaultClient on Transport.
var Client = &http.Client{Transport: Transport}
