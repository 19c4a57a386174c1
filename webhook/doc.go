// Package webhook pushes inbound messages to the customer's HTTPS endpoints,
// signed, through a durable outbox.
//
// The outbox is written in the same store transaction as the inbound message
// (InboundEvents is the builder the store calls there): a message the phone saw acknowledged
// always has its deliveries, and a message that was not stored has none. Each
// delivery is one event for one matching webhook entry, with its body fixed
// at that moment (the event's body is stored once and shared by its
// deliveries); its id goes out as the body's id and the
// X-Service-Delivery header on every attempt, so receivers de-duplicate.
// A company's pending outbox is bounded (Config.MaxPending,
// MaxPendingBytes): past it an event's deliveries are logged as failed.
//
// Run is the delivery side: one dispatcher reads due deliveries from a
// persisted index (next attempt time, then id), hands each to a bounded pool
// of workers and never hands out one delivery twice at once; between due
// times it sleeps until the next one or until a commit wakes it. At most
// Config.PerCompany attempts of one company, and two of one entry, run at
// once, so one tenant's hanging receivers never hold every worker. Because the
// index lives in the store, retries survive restarts. Each attempt is signed
// afresh (X-Service-Timestamp, X-Service-Signature), any 2xx delivers, and
// everything else is retried on the schedule, then failed. A 410 disables the
// entry at once; so does failing without a success for DisableAfter. Every
// attempt is one line of the deliveries log, which the worker hands to the
// store's group commit before it takes its next delivery; a recorder waits
// for the lines (at most recordsPerWorker per worker) and only then lets
// their deliveries be handed out again.
//
// The HTTP client refuses to connect to loopback, private, link-local,
// CGNAT, multicast and other non-public addresses, checked on the address
// actually dialled after DNS resolution, so a name that resolves (or later
// rebinds) to an internal address reaches nothing. AllowPrivate lifts this
// for self-hosters and tests. Redirects are not followed.
package webhook
