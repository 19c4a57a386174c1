// Package store names what simrelay keeps: the records (Message, Device,
// Company, WebhookDelivery, ...), the errors a backend answers with, and the
// builders of the webhook events a write stores with its change
// (StatusEvents, InboundEvents, DeviceEvents). It holds no storage itself.
//
// Two backends keep these records: boltstore, one embedded bbolt file (the
// default, for one machine), and postgres, a PostgreSQL database that several
// nodes may share (contract section 12). Each domain package declares the
// narrow interface of the methods it calls (sms.Store, webhook.Store, ...), and
// both backends answer them with the same behaviour: every rule a method keeps
// (a plan limit, a budget, an idempotency key, an opt-out) holds inside that
// method's one transaction, whichever backend runs it.
package store
