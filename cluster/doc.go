// Package cluster is what the nodes of one simrelay cluster tell each other.
//
// PostgreSQL is the one source of truth; the bus (core NATS) carries only
// "look again" signals (a device has new jobs, a link was taken over, a
// cache entry changed) and the console's live-view events. Nothing on the
// bus is stored, acknowledged or replayed: a signal lost while a node
// reconnects delays what it announces until the next safety sweep of the
// consumer (documented where each consumer is), never loses it.
//
// Subjects are "<prefix>.<topic>", and a server's prefix is its
// cluster's: "simrelay.<id>", with an id made once in the database
// (Prefix). So the nodes of one database hear each other, and clusters on
// other databases that share the NATS server or account hear nothing of
// them (their signals, controls, beats and live events stay apart). A node
// does not hear its own messages (NoEcho): whoever publishes acts locally
// first, then publishes for the other nodes.
package cluster
