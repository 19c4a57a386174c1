package store

import bolt "go.etcd.io/bbolt"

// WriteTx is the store's write transaction as an inbound hook sees it: the
// hook writes through the store's own methods that take one (AddWebhookEvent),
// so its writes are durable with the message or not at all, and it learns
// of the commit through OnCommit. No bbolt type leaves the package, so a
// second backend can stand behind the same hooks.
type WriteTx struct{ tx *bolt.Tx }

// OnCommit runs fn once the transaction has committed durably; never if it
// does not (a group commit that retries a batch runs the hook again, and only
// the try that commits calls fn).
func (t WriteTx) OnCommit(fn func()) { t.tx.OnCommit(fn) }

// InboundHook runs inside the transaction that stores a new inbound message
// (the webhook outbox): a hook's error refuses the whole message.
type InboundHook func(tx WriteTx, m Message) error
