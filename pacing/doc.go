// Package pacing holds per-key limiters: the API rate-limit windows
// (windows.go), a count in windows the nodes of a cluster share with this
// node's own as its fallback (shared.go), and the anti-ban governor of
// WhatsApp numbers and iMessage handles (governor.go: rolling caps per
// minute, hour and day, warm-up, and a jittered gap between dispatches).
// A device's optional SMS pace (sms_per_minute) spaces sends evenly on its
// link in gateway/.
//
// Limiters never start goroutines and never read the wall clock on their
// own: the caller injects the clock (and the governor's random source) and
// decides when to sweep, so tests are deterministic and the owner of every
// goroutine stays in cmd/simrelay.
package pacing
