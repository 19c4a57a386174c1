// Package smtpd is e-mail to SMS: an SMTP listener (--smtp-listen) that
// takes mail to +15551234567@<domain> (or +15551234567+pool-NAME@<domain>,
// through a sender pool) from a company authenticated with its API key, reads the text of the mail (text/plain preferred, HTML turned
// into text, signature and quoted reply cut) and queues it as an SMS
// through sms.Service.Send, the function POST /chat/send calls, so the
// API's rules (opt-outs, plan limits, storage budget, device state, length)
// apply unchanged. The API's rate limits count its sends and its failed
// logins in the same windows as the API's. Every refusal is an SMTP reply a
// mail client shows its user. docs/email.md is the user's description.
package smtpd
