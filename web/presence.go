package web

import "github.com/simrelay/simrelay/store"

// DevicePresence is the hub's presence hook (gateway.Presence) that tells
// the console's tabs of a device's link coming and going, so that its badge
// (the messages page's device list, a number's agent) changes without a
// reload, and hands both on to Next (device presence: device.online and
// device.offline). A link that ended may leave the device linked all the
// same (a newer link here, or on another node of a cluster, which fenced
// this one out before it ended): the tabs are told what Online answers
// then, what a page drawn at that moment would show.
type DevicePresence struct {
	Next interface {
		Up(store.Device)
		Down(store.Device)
	} // nil: none
	// Online says whether the device (fingerprint and id) is linked now:
	// on a cluster, on any node.
	Online func(fingerprint string, deviceID uint64) bool
	// Tell hands the change to the company's tabs: Broker.DeviceChanged,
	// or on a cluster what also offers it to the other nodes.
	Tell func(company uint64, fingerprint string, online bool)
}

// Up is called when a link of dev is registered.
func (p DevicePresence) Up(dev store.Device) {
	if p.Next != nil {
		p.Next.Up(dev)
	}
	p.Tell(dev.CompanyID, dev.Fingerprint, true)
}

// Down is called when the registered link of dev ended (or one whose hello
// was stored was refused after all).
func (p DevicePresence) Down(dev store.Device) {
	if p.Next != nil {
		p.Next.Down(dev)
	}
	p.Tell(dev.CompanyID, dev.Fingerprint, p.Online(dev.Fingerprint, dev.ID))
}
