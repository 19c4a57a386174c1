package store

// WriteTx is the store's write transaction as an inbound hook sees it: the
// hook writes through the store's own methods that take one (AddWebhookEvent),
// so its writes are durable with the message or not at all, and it learns
// of the commit through OnCommit. No bbolt type leaves the package, so a
// second backend can stand behind the same hooks.
type WriteTx interface {
	// OnCommit runs fn once the transaction has committed durably; never if
	// it does not (a transaction that is tried again runs the hook again,
	// and only the try that commits calls fn).
	OnCommit(fn func())
}

// Transit is a report's change of a message on its way to a durable commit
// (TransitionLater).
type Transit interface {
	// Wait returns the message as the change left it, whether the change
	// moved it, and any error, once the change is durable; call it once.
	Wait() (Message, bool, error)
}

// AttemptRecord is a webhook attempt's line on its way to a durable commit
// (RecordWebhookAttemptLater).
type AttemptRecord interface {
	// Wait returns the attempt's line once it is durable, or the write's
	// error; call it once.
	Wait() (WebhookAttempt, error)
}

// InboundHook runs inside the transaction that stores a new inbound message
// (the webhook outbox): a hook's error refuses the whole message.
type InboundHook func(tx WriteTx, m Message) error
