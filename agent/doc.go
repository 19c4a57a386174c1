// Package agent is the device side of PROTOCOL.md for real devices: the
// second implementation of the phone protocol, after the reference client.
//
// One core is shared by every kind of device: the configuration file written
// by pairing, a journal on disk (bbolt) that makes every acked job survive a
// crash without being carried out twice, the link with the reconnect backoff
// of PROTOCOL.md section 14, pacing, and the outboxes of reports and inbound
// messages that are sent again until the server acknowledges them. What
// differs between devices is a Transport: agent/termux drives an Android
// phone through Termux:API, agent/modem a USB modem through ModemManager's
// mmcli. cmd/simrelay-agent wires them; the server binary never imports this
// tree.
package agent
