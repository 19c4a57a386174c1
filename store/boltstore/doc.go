// Package boltstore keeps simrelay's state in one embedded bbolt file: the
// default backend of package store, for one machine.
//
// Habits of the package: every bucket is created when the store opens; keys of
// records are big-endian sequence numbers so a cursor walks them in insertion
// order; every method is one short transaction; records (these types) are
// separate from the JSON shapes of the API; values are decoded inside the
// transaction, so nothing handed out points into bbolt's memory map.
// The schema version lives in the meta bucket and each migration step runs in
// its own transaction; a migration too big for one keeps a cursor in meta and
// bumps the version only with its last step.
//
// Devices and tenants. A device has a fingerprint (the handset's, reused when
// the handset is paired again, possibly by another company) and an id (the
// devices bucket's sequence number: kept by a re-registration within the
// company, never reused after a delete). Only the live device hangs off the
// fingerprint:
//
//	devices            fingerprint             -> Device (live only)
//	device_tokens      sha256(token)           -> device id + fingerprint
//	company_device_ids company id + device id  -> fingerprint (live only)
//
// Everything a device owns is keyed by dev = company id (8 bytes) + device id
// (8 bytes), big-endian, so a prefix walk never leaves one company's
// registration of a handset:
//
//	dev_queue          dev + message id            -> nil (queued, in order)
//	dev_queue_priority dev + (9 - priority) + place -> message id (queued with a priority)
//	dev_sending        dev + message id            -> nil (acked, no outcome yet)
//	dev_conv_messages  dev + phone + 0 + message id -> nil
//	dev_conversations  dev + phone                 -> Conversation
//	dev_conv_order     dev + last message id       -> phone
//	dev_inbound        dev + tag [+ slot] + id     -> nil
//	dev_inbound_client dev + client id             -> message id
//	queue_expiry       expires_at + message id     -> dev
//	schedule_due       send_at or held_until + id  -> dev (scheduled, or held outside its window)
//
// Messages carry CompanyID and DeviceID (and the fingerprint, for display).
// Every method that acts for a company or a phone's link checks, inside its
// own transaction, that the device is that company's live registration and
// that each message it touches is that device's.
package boltstore
