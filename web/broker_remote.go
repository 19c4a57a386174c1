package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/simrelay/simrelay/store"
)

// A cluster's nodes share their live events: each renders a change once,
// hands it to its own tabs (Deliver) and sends the same bytes to the other
// nodes, whose tabs get them through Deliver too. The bytes are the event
// exactly as a tab receives it, so a tab cannot tell which node committed
// the change.

// RenderLive is a committed message change as its company's tabs draw it
// now (by the broker's clock): the company and the JSON of one "message"
// event.
func (b *Broker) RenderLive(m store.Message) (company uint64, body []byte, err error) {
	body, err = json.Marshal(liveOut(m, b.now()))
	if err != nil {
		return 0, nil, fmt.Errorf("live event of message %d: %w", m.ID, err)
	}
	return m.CompanyID, body, nil
}

// Deliver fans an event rendered by RenderLive (on this node or another)
// out to the company's tabs on this node. It never blocks: a tab that
// cannot take it is dropped, as with MessageChanged.
//
// The body goes into an SSE data line as it is, so Deliver takes only one
// JSON value without line breaks: a broken or hostile body from the bus can
// neither add frames to a stream nor reach a tab.
func (b *Broker) Deliver(company uint64, body []byte) error {
	return b.deliver(company, liveEvent{eventMessage, body}, func() []topic {
		// Only what the topics are of: the rest of the message (its
		// text, its media) is no use here.
		var m struct {
			Device   string `json:"device"`
			Channel  string `json:"channel"`
			NumberID string `json:"number_id"`
		}
		if json.Unmarshal(body, &m) != nil {
			return []topic{{kind: topicAll}}
		}
		topics := messageTopics(m.Device, m.Channel, m.NumberID)
		return topics[:]
	})
}

// DeliverDevice fans a device's event (RenderDevice, on this node or
// another) out to the company's tabs on this node, as Deliver does a
// message's.
func (b *Broker) DeliverDevice(company uint64, body []byte) error {
	return b.deliver(company, liveEvent{eventDevice, body}, func() []topic {
		var d liveDevice
		if json.Unmarshal(body, &d) != nil {
			return []topic{{kind: topicAll}, {kind: topicDevices}}
		}
		topics := deviceTopics(d.Device)
		return topics[:]
	})
}

// deliver fans ev out; topics reads the topics of its change from its
// body, as the node that rendered it noted them (a body of no event's
// shape, which no tab draws, is of the company's changes, as it was).
func (b *Broker) deliver(company uint64, ev liveEvent, topics func() []topic) error {
	if company == 0 {
		return errors.New("live event without a company")
	}
	if bytes.ContainsAny(ev.body, "\r\n") || !json.Valid(ev.body) {
		return fmt.Errorf("live %s event for company %d: not one line of JSON", ev.name, company)
	}
	if b.told(company, topics()) { // as MessageChanged: a tab opened meanwhile learns it missed one
		b.publish(company, ev)
	}
	return nil
}

// Resync ends every stream of this node, as if each had fallen behind:
// their browsers reconnect within seconds and reload what they show. A
// cluster calls it when this node may have missed other nodes' events
// (its bus connection came back).
func (b *Broker) Resync() {
	b.mu.Lock()
	var all []*subscriber
	for _, subs := range b.subs {
		for s := range subs {
			all = append(all, s)
		}
	}
	b.mu.Unlock()
	for _, s := range all {
		b.drop(s)
	}
}
