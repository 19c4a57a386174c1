// Package store keeps simrelay's state in one embedded bbolt file.
//
// Habits of the package: every bucket is created when the store opens; keys of
// records are big-endian sequence numbers so a cursor walks them in insertion
// order; every method is one short transaction; records (these types) are
// separate from the JSON shapes of the API; values are decoded inside the
// transaction, so nothing handed out points into bbolt's memory map.
// The schema version lives in the meta bucket and each migration step runs in
// its own transaction.
package store
