package webhook

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/simrelay/simrelay/store"
)

// Device events: opt-in per entry through its events list, like the status
// events. The device domain says which events a change raises
// (store.UpdateDeviceWith) and the store writes them, with DeviceEvents,
// inside the transaction that records the change, so the device's state
// and the event are durable together.
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

// DeviceEvents is the store's builder of device events
// (store.SetDeviceEvents): a device.* event of the device as its change
// left it, inside the transaction that stores the change, for every active
// entry that asked for its type and whose devices scope takes the device
// (the other scope lists name messages, not devices, and do not narrow
// device events). A type that is not a device event's refuses the change.
func (s *Service) DeviceEvents() store.DeviceEvents {
	return store.DeviceEvents{
		Limits: s.outboxLimits(),
		Build: func(set store.WebhookSet, d store.Device, de store.DeviceEvent) (store.WebhookEvent, []store.WebhookDelivery, error) {
			eventType, at := de.Type, de.At
			if !slices.Contains(deviceEventTypes, eventType) {
				return store.WebhookEvent{}, nil, fmt.Errorf("webhook: %q is not a device event", eventType)
			}
			now := s.now().UTC()
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
		},
		Committed: func(d store.Device, de store.DeviceEvent, res store.OutboxAdd) {
			if res.Queued > 0 {
				s.Kick()
			}
			if res.Refused > 0 {
				s.log.Warn("webhook outbox full: the device event's deliveries are logged as failed, not queued",
					"company", d.CompanyID, "device", d.Fingerprint, "event", de.Type, "deliveries", res.Refused,
					"pending", res.Pending, "pending_bytes", res.PendingBytes)
			}
		},
	}
}
