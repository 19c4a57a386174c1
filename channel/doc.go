// Package channel is WhatsApp and iMessage: the numbers and handles agents
// announce, sends through them paced by the anti-ban governor (pacing), the
// agents' jobs and their inbound messages. It sits beside sms/ and shares
// its store paths: one message record, one transition path for statuses,
// one expiry sweep, one idempotency store, one plan limit.
package channel
