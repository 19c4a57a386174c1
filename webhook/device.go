package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Device events: opt-in per entry through its events list, like the status
// events. The device domain raises them inside the transaction that
// records the change (DeviceEvent), so the device's state and the event
// are durable together.
const (
	EventDeviceOnline     = "device.online"
	EventDeviceOffline    = "device.offline"
	EventDeviceBatteryLow = "device.battery_low"
)

var deviceEventTypes = []string{EventDeviceOnline, EventDeviceOffline, EventDeviceBatteryLow}

// DeviceData is the data of a device.* event: the device and its last
// health report (null fields when it sent none).
type DeviceData struct {
	DeviceFingerprint string  `json:"device_fingerprint"`
	DeviceName        string  `json:"device_name"`
	Online            bool    `json:"online"`
	LastSeenAt        *string `json:"last_seen_at"`
	Battery           *int    `json:"battery"`
	Charging          *bool   `json:"charging"`
	Signal            *int    `json:"signal"`
	Network           *string `json:"network"`
}

type devicePayload struct {
	Type      string     `json:"type"`
	CreatedAt string     `json:"created_at"`
	Data      DeviceData `json:"data"`
}

func deviceData(d store.Device, eventType string) DeviceData {
	out := DeviceData{DeviceFingerprint: d.Fingerprint, DeviceName: d.Name, Online: eventType != EventDeviceOffline}
	if !d.LastSeenAt.IsZero() {
		v := d.LastSeenAt.UTC().Format(timeLayout)
		out.LastSeenAt = &v
	}
	if h := d.Health; h != nil && !h.ReportedAt.IsZero() {
		out.Battery, out.Charging, out.Signal, out.Network = h.Battery, h.Charging, h.Signal, orNull(h.Network)
	}
	return out
}

// DeviceEvent writes a device.* event of d, inside tx, for every active
// entry that asked for its type and whose devices scope takes the device
// (the other scope lists name messages, not devices, and do not narrow
// device events). A spent storage budget drops the event with a log line
// rather than refuse the device's own update.
func (s *Service) DeviceEvent(tx store.WriteTx, d store.Device, eventType string, at time.Time) error {
	if !slices.Contains(deviceEventTypes, eventType) {
		return fmt.Errorf("webhook: %q is not a device event", eventType)
	}
	now := s.now().UTC()
	res, err := s.store.AddWebhookEvent(tx, d.CompanyID, at, s.outboxLimits(), func(set store.WebhookSet) (store.WebhookEvent, []store.WebhookDelivery, error) {
		var ev store.WebhookEvent
		var out []store.WebhookDelivery
		for _, e := range set.Entries {
			if !e.Active || !Wants(e, eventType) || (len(e.Devices) > 0 && !slices.Contains(e.Devices, d.Fingerprint)) {
				continue
			}
			if ev.ID == "" {
				body, err := json.Marshal(devicePayload{Type: eventType, CreatedAt: at.UTC().Format(timeLayout), Data: deviceData(d, eventType)})
				if err != nil {
					return ev, nil, err
				}
				ev = store.WebhookEvent{ID: newID(), Body: body}
			}
			out = append(out, store.WebhookDelivery{UUID: newID(), EventType: eventType, WebhookID: e.ID, CreatedAt: now, NextAttemptAt: now})
		}
		return ev, out, nil
	})
	if errors.Is(err, store.ErrStorageBudget) {
		s.log.Warn("storage budget spent: device event not queued", "company", d.CompanyID, "device", d.Fingerprint, "event", eventType)
		return nil
	}
	if err != nil {
		return fmt.Errorf("webhook: outbox of %s for device %s: %w", eventType, d.Fingerprint, err)
	}
	if res.Queued > 0 {
		tx.OnCommit(s.Kick)
	}
	if res.Refused > 0 {
		tx.OnCommit(func() {
			s.log.Warn("webhook outbox full: the device event's deliveries are logged as failed, not queued",
				"company", d.CompanyID, "device", d.Fingerprint, "event", eventType, "deliveries", res.Refused,
				"pending", res.Pending, "pending_bytes", res.PendingBytes)
		})
	}
	return nil
}
