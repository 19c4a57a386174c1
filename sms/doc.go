// Package sms is the core loop: a send is stored durably (group commit)
// before it is answered, goes to the device's link in order with at most a
// window of un-acked jobs, and its fate (sending, sent, delivered, failed,
// expired) lands in history; an SMS arriving on a phone is stored once and
// acknowledged only when durable.
package sms
