// Package cluster is what the nodes of one simrelay cluster tell each other.
//
// PostgreSQL is the one source of truth; the bus (core NATS) carries only
// "look again" signals (a device has new jobs, a link was taken over, a
// cache entry changed) and the console's live-view events. Nothing on the
// bus is stored, acknowledged or replayed: a signal lost while a node
// reconnects delays what it announces until the next safety sweep of the
// consumer (documented where each consumer is), never loses it.
//
// Subjects are "<prefix>.<topic>", where the prefix (default "simrelay")
// lets several clusters share one NATS account. A node does not hear its own
// messages (NoEcho): whoever publishes acts locally first, then publishes
// for the other nodes.
package cluster
