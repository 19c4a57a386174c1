package boltstore

import bolt "go.etcd.io/bbolt"

// writeTx is the bbolt transaction behind a WriteTx.
type writeTx struct{ tx *bolt.Tx }

func (t writeTx) OnCommit(fn func()) { t.tx.OnCommit(fn) }
