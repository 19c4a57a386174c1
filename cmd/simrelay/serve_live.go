package main

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/web"
)

// liveViews feeds the console's live streams (sms.Watcher and
// channel's, and devices' links through web.DevicePresence): every
// committed message change, and every link that came or went, goes to this node's tabs and,
// on a cluster, through the bus to the tabs of every other node, so a tab
// shows what any node committed. On a single node it is the broker alone,
// exactly as before: nothing is rendered twice, nothing queued.
type liveViews struct {
	broker *web.Broker
	relay  *cluster.Live // nil on a single node
	log    *slog.Logger
}

// startLive wires the broker to the bus; bus nil is a single node. Close
// the result before the bus.
func startLive(bus *cluster.Bus, broker *web.Broker, log *slog.Logger) (*liveViews, error) {
	l := &liveViews{broker: broker, log: log}
	if bus == nil {
		return l, nil
	}
	relay, err := cluster.StartLive(bus, broker.Deliver, broker.Resync, log)
	if err != nil {
		return nil, fmt.Errorf("console live views: %w", err)
	}
	if err := relay.HearDevices(broker.DeliverDevice); err != nil {
		relay.Close()
		return nil, fmt.Errorf("console live views: %w", err)
	}
	l.relay = relay
	return l, nil
}

// DeviceChanged hands a device's link coming or going (online: whether it
// is linked now) to the local tabs, then offers it to the other nodes, as
// MessageChanged does a message (web.DevicePresence calls it).
func (l *liveViews) DeviceChanged(company uint64, fingerprint string, online bool) {
	if l.relay == nil {
		l.broker.DeviceChanged(company, fingerprint, online)
		return
	}
	body := web.RenderDevice(fingerprint, online)
	if err := l.broker.DeliverDevice(company, body); err != nil {
		l.log.Error("console live view", "err", err)
		return
	}
	l.relay.OfferDevice(company, body)
}

// MessageChanged hands a committed change to the local tabs, then offers
// it to the other nodes; neither waits (the bus's queue full drops the
// event for the other nodes, counted in simrelay_live_events_dropped_total).
func (l *liveViews) MessageChanged(m store.Message) {
	if l.relay == nil {
		l.broker.MessageChanged(m)
		return
	}
	company, body, err := l.broker.RenderLive(m)
	if err != nil {
		l.log.Error("console live view", "err", err)
		return
	}
	if err := l.broker.Deliver(company, body); err != nil {
		l.log.Error("console live view", "err", err)
		return
	}
	l.relay.Offer(company, body)
}

// register adds the cluster's live-view counter to the node's metrics.
func (l *liveViews) register(reg prometheus.Registerer) {
	if l.relay == nil {
		return
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "simrelay_live_events_dropped_total",
		Help: "Console live events of this node dropped on their way to the other nodes (the bus's queue full, the NATS client's buffer full while the bus is away, or the bus closed); other nodes' tabs show those changes when they next load.",
	}, func() float64 { return float64(l.relay.Dropped()) }))
}

// Close stops the relay; the bus sends what is queued when it closes.
func (l *liveViews) Close() {
	if l.relay != nil {
		l.relay.Close()
	}
}
