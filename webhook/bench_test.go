package webhook

import (
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// BenchmarkSign signs a typical delivery body, as every attempt does.
func BenchmarkSign(b *testing.B) {
	body, err := payload(newID(), EventSMSReceived, benchMessage())
	if err != nil {
		b.Fatal(err)
	}
	secret, err := NewSecret()
	if err != nil {
		b.Fatal(err)
	}
	stamp := time.Now().Unix()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		_ = Sign(secret, stamp, body)
	}
}

// BenchmarkPayload builds a delivery body inside the inbound transaction.
func BenchmarkPayload(b *testing.B) {
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := payload("0193a1c2-7d4e-7f00-8a1b-2c3d4e5f6a7b", EventSMSReceived, m); err != nil {
			b.Fatal(err)
		}
	}
}

func benchMessage() store.Message {
	return store.Message{
		ID: 42, UUID: "7d4c9a4e-1f7e-4b8a-8f0e-2a9d3c5e6f70", Direction: store.Inbound, Channel: "sms",
		Device: "pixel-7-a1b2c3", Phone: "+15551234567", SIMSlot: "SIM1",
		Text:       "Your table for two is confirmed for 7:30 pm. Reply C to cancel.",
		ReceivedAt: "2026-11-22T10:04:05.123Z", CreatedAt: time.Now(),
	}
}
