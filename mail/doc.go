// Package mail is simrelay's outgoing e-mail: verification, password-reset
// and invitation messages, delivered through a durable outbox.
//
// Send persists a message in the outbox (the store) before it returns, so a
// crash after a sign-up never loses the verification mail. One worker, Run,
// drains the outbox: it picks up whatever a previous process left pending,
// delivers over SMTP (STARTTLS, required unless the URL's tls parameter or a
// loopback relay without credentials says otherwise, or implicit TLS for
// smtps://) and retries failures on a backoff schedule until it gives up.
//
// SMTP is optional. Without --smtp-url every mail is written to the log at
// INFO, body included, and kept in the outbox where `simrelay admin mail`
// shows it: a self-hosted server without a mail relay still lets its admin
// hand out verification links.
//
// Delivery is at least once: if the store cannot record a successful send,
// the mail is sent again later. Every attempt carries the same Message-ID so
// receiving servers and clients can fold duplicates.
//
// Package mailtest holds a real SMTP inbox for tests of this package and of
// the packages that send mail through it.
package mail
