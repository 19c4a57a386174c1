// Package pacing holds per-key limiters: the API rate-limit windows now; the
// anti-ban governor for WhatsApp/iMessage and per-SIM SMS pacing will join
// later.
//
// Limiters never start goroutines and never read the wall clock on their
// own: the caller injects the clock and decides when to sweep, so tests are
// deterministic and the owner of every goroutine stays in cmd/simrelay.
package pacing
