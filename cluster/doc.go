// Package cluster is what the nodes of one simrelay cluster tell each other.
//
// PostgreSQL is the one source of truth; the bus (core NATS) carries only
// "look again" signals (a device has new jobs, a link was taken over, a
// cache entry changed) and the console's live-view events. Nothing on the
// bus is stored, acknowledged or replayed: a signal lost while a node
// reconnects delays what it announces until the next safety sweep of the
// consumer (documented where each consumer is), never loses it.
//
// Subjects are "<prefix>.<topic>". The server always uses the default
// prefix ("simrelay"; Config.Prefix is for tests), so clusters that share
// a NATS server need an account each (docs/cluster.md): on one account
// they would hear each other's signals and live events. A node does not
// hear its own messages (NoEcho): whoever publishes acts locally first,
// then publishes for the other nodes.
package cluster
