package agent

import (
	"strings"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/phone"
)

// Limits of a hello (PROTOCOL.md 4.5, 8.1 and 16.1). The server refuses a
// hello that breaks one with close 4000, and would refuse it again on every
// reconnect, so the agent applies them before it sends (7.1 rule 4).
const (
	maxHelloSIMs    = 2
	maxHelloNumbers = 20 // of each agent channel
	maxCarrierBytes = 64
	maxVersionBytes = 64
	maxHandleBytes  = 254
)

// checkHello returns h with what the server would refuse left out: a SIM
// of an unknown or repeated slot, a third SIM, a phone number not in E.164
// (spaces, dashes, dots and brackets are removed first, as the server
// does), numbers and handles beyond 20 or invalid, and texts cut to their
// byte limits on a character boundary. Each change is logged.
func (a *Agent) checkHello(h proto.Hello) proto.Hello {
	h.AppVersion = proto.CutBytes(h.AppVersion, maxVersionBytes)
	sims := make([]proto.SIM, 0, len(h.SIMs))
	seen := map[string]bool{}
	for _, s := range h.SIMs {
		if !proto.IsSIMSlot(s.Slot) || seen[s.Slot] || len(sims) == maxHelloSIMs {
			a.log.Warn("hello: SIM left out (unknown or repeated slot)", "slot", s.Slot)
			continue
		}
		seen[s.Slot] = true
		if c := proto.CutBytes(s.Carrier, maxCarrierBytes); c != s.Carrier {
			a.log.Warn("hello: carrier name cut to 64 bytes", "slot", s.Slot)
			s.Carrier = c
		}
		if s.PhoneNumber != "" {
			n, ok := e164(s.PhoneNumber)
			if !ok {
				a.log.Warn("hello: SIM number left out: not in international format (+ and 8 to 15 digits)", "slot", s.Slot, "number", s.PhoneNumber)
			}
			s.PhoneNumber = n
		}
		sims = append(sims, s)
	}
	if h.SIMs != nil {
		h.SIMs = sims
	}
	var wa []proto.WhatsAppNumber
	for _, w := range h.WhatsApp {
		n, ok := e164(w.Phone)
		if !ok || len(wa) == maxHelloNumbers {
			a.log.Warn("hello: WhatsApp number left out (not E.164, or over 20)", "phone", w.Phone)
			continue
		}
		wa = append(wa, proto.WhatsAppNumber{Phone: n})
	}
	h.WhatsApp = wa
	var im []proto.IMessageHandle
	for _, m := range h.IMessage {
		handle := m.Handle
		if strings.HasPrefix(handle, "+") {
			handle, _ = e164(handle)
		}
		if handle == "" || len(handle) > maxHandleBytes || len(im) == maxHelloNumbers ||
			(!strings.HasPrefix(handle, "+") && !strings.Contains(handle, "@")) {
			a.log.Warn("hello: iMessage handle left out (not E.164 or an e-mail address, or over 20)", "handle", m.Handle)
			continue
		}
		im = append(im, proto.IMessageHandle{Handle: handle})
	}
	h.IMessage = im
	if h.Health != nil {
		health := a.checkHealth(*h.Health)
		h.Health = &health
	}
	return h
}

// checkHealth returns h with what the server would refuse left out (an
// invalid hello.health would refuse the whole hello): percentages outside
// 0-100, a network type that is not 16 lower-case letters, digits, dashes
// or underscores, SIMs of unknown or repeated slots; operators are cut to
// 64 bytes.
func (a *Agent) checkHealth(h proto.Health) proto.Health {
	percent := func(v *int, what string) *int {
		if v != nil && (*v < 0 || *v > 100) {
			a.log.Warn("health: left out, not a percentage", "field", what, "value", *v)
			return nil
		}
		return v
	}
	h.Battery, h.Signal = percent(h.Battery, "battery"), percent(h.Signal, "signal")
	h.Network = strings.ToLower(h.Network)
	if len(h.Network) > proto.MaxNetworkBytes || strings.IndexFunc(h.Network, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		a.log.Warn("health: network type left out", "network", h.Network)
		h.Network = ""
	}
	var sims []proto.SIMHealth
	seen := map[string]bool{}
	for _, s := range h.SIMs {
		if !proto.IsSIMSlot(s.Slot) || seen[s.Slot] {
			continue
		}
		seen[s.Slot] = true
		s.Operator = proto.CutBytes(s.Operator, proto.MaxOperatorBytes)
		sims = append(sims, s)
	}
	h.SIMs = sims
	return h
}

// e164 normalises a number with the server's own rules (package phone)
// and says whether it is E.164; it returns "" when not.
func e164(n string) (string, bool) {
	out, err := phone.Normalize(n)
	return out, err == nil
}
