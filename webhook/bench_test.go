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

// BenchmarkPayload builds an event's body inside the inbound transaction.
func BenchmarkPayload(b *testing.B) {
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := eventBody(EventSMSReceived, m, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// payload is the body one delivery sends: the event's shared body with the
// delivery's id in front, as the worker reads it from the store.
func payload(deliveryID, eventType string, m store.Message) ([]byte, error) {
	body, err := eventBody(eventType, m, nil)
	if err != nil {
		return nil, err
	}
	return store.DeliveryBody(deliveryID, body), nil
}

func benchMessage() store.Message {
	return store.Message{
		ID: 42, UUID: "7d4c9a4e-1f7e-4b8a-8f0e-2a9d3c5e6f70", Direction: store.Inbound, Channel: "sms",
		Device: "pixel-7-a1b2c3", Phone: "+15551234567", SIMSlot: "SIM1",
		Text:       "Your table for two is confirmed for 7:30 pm. Reply C to cancel.",
		ReceivedAt: "2026-11-22T10:04:05.123Z", CreatedAt: time.Now(),
	}
}
