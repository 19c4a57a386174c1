package store

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
