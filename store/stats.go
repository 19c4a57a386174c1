package store

import (
	"time"
)

// StatsNoUser is the user of counters no user caused: inbound messages.
const StatsNoUser = ^uint64(0)

// Channel bytes of the counter keys.
const (
	ChannelOther    byte = 0
	ChannelSMS      byte = 1
	ChannelWhatsApp byte = 2
	ChannelIMessage byte = 3
)

// ChannelByte is a channel's byte in counter keys.
func ChannelByte(channel string) byte {
	switch channel {
	case "sms", "":
		return ChannelSMS
	case "whatsapp":
		return ChannelWhatsApp
	case "imessage":
		return ChannelIMessage
	}
	return ChannelOther
}

// Counts are the message counters of one key.
type Counts struct {
	Sent, Delivered, Failed, Received, Expired uint64
	// Segments are the segments of the messages counted in Sent.
	Segments uint64
}

func (c *Counts) Add(o Counts) {
	c.Sent += o.Sent
	c.Delivered += o.Delivered
	c.Failed += o.Failed
	c.Received += o.Received
	c.Expired += o.Expired
	c.Segments += o.Segments
}

func (c Counts) IsZero() bool { return c == Counts{} }

// StatsDay numbers UTC days since 1970-01-01, as counter keys do.
func StatsDay(t time.Time) uint32 { return uint32(t.Unix() / 86400) }

// StatsDate is the start (UTC) of a day number.
func StatsDate(day uint32) time.Time { return time.Unix(int64(day)*86400, 0).UTC() }

// StatusCounts is what moving an outbound message from one status to the
// next counts.
func StatusCounts(m Message, from, to string) Counts {
	var c Counts
	reached := func(s string) bool { return s == MsgSent || s == MsgDelivered }
	if reached(to) && !reached(from) {
		c.Sent, c.Segments = 1, uint64(max(m.Segments, 0))
	}
	switch to {
	case MsgDelivered:
		c.Delivered = 1
	case MsgFailed:
		c.Failed = 1
	case MsgExpired:
		c.Expired = 1
	}
	return c
}

// MessageUser is the counter user of a message.
func MessageUser(m Message) uint64 {
	if m.Direction == Inbound {
		return StatsNoUser
	}
	return m.UserID
}
