package agent

import (
	"context"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// Transport carries out jobs on one kind of device and brings in what the
// device receives. The core owns the journal, the link and the reports; a
// transport only talks to its tool (termux-sms-send, mmcli, a WhatsApp
// session, osascript...). Its methods are called from several goroutines:
// Execute from the executor (one job at a time), Delivery from the delivery
// poller, Acknowledge from the link, Inventory before each hello.
type Transport interface {
	// Name is the transport's name in logs and flags ("termux", "modem").
	Name() string
	// Check verifies that the transport's tools are installed and usable,
	// before the agent connects; its error says what to install or grant.
	Check(ctx context.Context) error
	// Inventory says what the device serves, for hello: its SIMs, and (for
	// agents of other channels) WhatsApp numbers or iMessage handles.
	Inventory(ctx context.Context) (Inventory, error)
	// Execute hands one job to the device and returns what became of it as
	// far as the device can tell now: sent, or failed with an error code of
	// PROTOCOL.md section 9.6. A transport that learns the delivery later
	// returns a Ref (its own id of the message, kept in the journal) and
	// AwaitDelivery; the core then asks Delivery until it is final.
	// Before the tool is given the message, Execute may call job.Remember
	// to journal a ref (e.g. the modem's SMS object) that Recover can use
	// after a crash.
	Execute(ctx context.Context, job Job) (Outcome, error)
	// Recover decides about a job that was being executed when the agent
	// stopped (it was handed to the tool, and no outcome was journaled).
	// known is false when the transport cannot tell: the core then reports
	// it failed with outcome_unknown, never sends it again.
	Recover(ctx context.Context, job Job) (out Outcome, known bool)
	// Delivery polls the delivery of a message sent with AwaitDelivery
	// (a transport told by push answers a Delivery that is not Final and
	// calls Sink.Deliver instead).
	Delivery(ctx context.Context, ref string) (Delivery, error)
	// Receive runs until ctx ends, handing received messages to sink, which
	// journals them durably before it returns.
	Receive(ctx context.Context, sink Sink) error
	// Acknowledge is called once the server stored an inbound message
	// (inbound_ack) or refused it for good: the transport may now delete it
	// at the source or mark it. msg holds the message's Key, Ref and frame
	// fields (Key is its client_id for a message journaled before keys were
	// kept). It is called again after a restart until it returns nil.
	Acknowledge(ctx context.Context, msg Received) error
}

// ClearedKeys is implemented by a transport whose source never shows a
// message again once it was cleared there (Acknowledge) some time ago:
// the journal then forgets the client_id of a message cleared
// ClearedKeyRetention or longer before (Journal.pruneInboundIDs, in the
// agent's hourly prune). A transport without it keeps every cleared
// client_id for ever: its source may show an old message again, under
// the same key, at any time (iMessage's chat.db re-synced from iCloud), or
// it gives a new message the key of a cleared one once that key is
// forgotten (the modem's same-content SMS). docs/agents.md, "What the
// journal holds", says which transport does what and why.
type ClearedKeys interface {
	// ClearedKeyRetention is how long after a message was cleared at the
	// source its key must stay known; more than 0.
	ClearedKeyRetention() time.Duration
}

// Inventory is what a device announces in hello.
type Inventory struct {
	SIMs     []proto.SIM
	WhatsApp []proto.WhatsAppNumber
	IMessage []proto.IMessageHandle
	// Health is the device's state now (battery, signal, network, each
	// SIM's operator): sent in hello and, every Options.HealthEvery, as a
	// health frame. nil: the transport cannot tell.
	Health *proto.Health
}

// Job is one journaled send job as a transport sees it.
type Job struct {
	proto.Send
	// Ref is what Remember journaled for this job, if anything.
	Ref string
	// DispatchedAt is when the core handed the job to Execute.
	DispatchedAt time.Time
	// Remember journals a transport reference before the tool is called.
	Remember func(ref string) error `json:"-"`
}

// Outcome is what became of a job when Execute returned.
type Outcome struct {
	// Status is proto.StatusSent, proto.StatusDelivered or proto.StatusFailed.
	Status string
	// Error is the failed report's error code (lower_snake_case).
	Error string
	// Ref identifies the message at the device, for Delivery.
	Ref string
	// AwaitDelivery says that a delivery report will come (Delivery).
	AwaitDelivery bool
	// Detail refines a delivered outcome (proto.DetailRead, DetailPlayed).
	Detail string
}

// Delivery is the state of a sent message's delivery report.
type Delivery struct {
	// Final is true when the report is in: Status is then delivered or failed.
	Final  bool
	Status string
	Error  string
	// Detail refines a delivered report: proto.DetailRead when the
	// recipient opened the message, DetailPlayed when a voice note or
	// video was played. Reported after the plain delivered.
	Detail string
}

// Received is one message the device received.
type Received struct {
	// Key is the transport's stable id of the message (never reused): the
	// client_id is made of the agent's salt and this key.
	Key     string
	Channel string
	From    string
	// To is the receiving number or handle (WhatsApp, iMessage only).
	To      string
	Text    string
	SIMSlot string
	At      time.Time
	// Media are the message's files (WhatsApp, iMessage), in order.
	Media []File
	// Ref is what Acknowledge needs to delete or mark the message at the
	// source (e.g. the modem's SMS object paths).
	Ref []string
}

// Sink takes received messages into the journal.
type Sink interface {
	// Take journals msgs (those already known are skipped) and, in the same
	// commit, sets the transport's mark (a high-water mark of what it has
	// read) when markKey is not empty. It returns once that is on disk.
	Take(msgs []Received, markKey, markValue string) error
	// Mark is the value last stored under key ("" when none).
	Mark(key string) (string, error)
	// Seen says what the journal knows of the message with this key: never
	// taken, held (taken, not yet acknowledged at the source), or cleared
	// (taken, then acknowledged at the source). A transport whose source
	// can hold a message again with the key of one it cleared (the modem:
	// a new SMS with the same sender, time and text) tells them apart by it.
	Seen(key string) (Seen, error)
	// Deliver reports, for a transport that is told about deliveries
	// (receipts pushed to it) rather than asking, the final delivery of the
	// message it sent with Outcome.Ref ref and AwaitDelivery. Unknown refs
	// are ignored, and so are settled ones unless d brings a new Detail
	// (a read receipt after the delivery).
	Deliver(ref string, d Delivery) error
}

// Seen is what the journal knows of a received message's key (Sink.Seen).
type Seen int

const (
	// SeenNew: no message with this key was taken.
	SeenNew Seen = iota
	// SeenHeld: taken, and not yet acknowledged at the source.
	SeenHeld
	// SeenCleared: taken, then acknowledged at the source (Acknowledge
	// returned nil) and forgotten; its key stays known, so the message is
	// never forwarded twice: for ever, or ClearedKeyRetention for a
	// transport that is ClearedKeys, after which it is SeenNew again.
	SeenCleared
)
