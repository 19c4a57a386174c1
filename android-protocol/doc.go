// Package androidproto is the wire protocol between a phone (or a macOS
// agent) and the simrelay hub: one Go type per frame, the close codes, and
// Encode/Decode. PROTOCOL.md beside this file is the normative description;
// the golden frames in testdata/ are its examples, round-tripped by tests.
package androidproto
