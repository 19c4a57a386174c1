// Package window is a sending window: the days of the week and the local
// hours, in an IANA time zone, when a message may go out. A send carries
// one (its `window`), and so may a sender pool for every send through it;
// outside its window a queued message waits (docs/routing.md).
//
// The time zone database is embedded (time/tzdata), and a zone must be one
// of its names (zones.go, generated from the toolchain's zoneinfo.zip), so a
// zone accepted on one host is accepted on every host, whatever its
// /usr/share/zoneinfo holds besides.
package window
