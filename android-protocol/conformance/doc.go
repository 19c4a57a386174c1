// Package conformance checks that android-protocol/PROTOCOL.md is enough to
// build a phone.
//
// Its test is an independent phone client written from PROTOCOL.md alone (and
// the REST routes of docs/api.md and README.md): it defines its own frames from
// the document's field tables and imports no package of this module, only the
// standard library and github.com/coder/websocket. It builds the simrelay
// binary, creates a company with `simrelay admin create-company`, starts
// `simrelay serve` on a loopback port, pairs phones as section 4 describes and
// exchanges every frame type of section 8 over the real WebSocket, checking
// every field the document marks required in each server frame, the resend and
// dedupe rules of section 12, the close codes of section 13 and what the REST
// API shows afterwards.
//
// Where the server and the document disagree, the test fails: fix the one that
// is wrong.
package conformance
