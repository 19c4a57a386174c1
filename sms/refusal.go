package sms

import "time"

// Refusal turns a store refusal of a send (plan limit, storage budget) into
// the error clients see, as the SMS routes answer it; other errors pass
// unchanged. The WhatsApp and iMessage sends answer the same way.
func Refusal(err error, now time.Time) error { return budgetRefusal(err, now) }
