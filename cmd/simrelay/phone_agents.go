package main

import (
	"fmt"
	"slices"
	"strings"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/phone"
	"github.com/simrelay/simrelay/phone/numplan"
)

// stringList is a repeatable flag (--whatsapp A --whatsapp B); its env
// twin takes a comma-separated list.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

// agentHello adds the virtual phone's WhatsApp numbers and iMessage
// handles to its hello: it then acts as an agent of both channels too.
func agentHello(h proto.Hello, cfg phoneConfig) proto.Hello {
	for _, n := range cfg.whatsapp {
		h.WhatsApp = append(h.WhatsApp, proto.WhatsAppNumber{Phone: n})
	}
	for _, n := range cfg.imessage {
		h.IMessage = append(h.IMessage, proto.IMessageHandle{Handle: n})
	}
	return h
}

// helloFault checks what the flags put in the hello as the server checks
// it, before anything is sent: a hello the server refuses (invalid_hello)
// is refused again at every reconnect, so a phone must check its own first
// (PROTOCOL.md section 4). The virtual phone paired, then reconnected
// forever with a --selected-sim, --whatsapp or --imessage the server
// refused. Numbers are E.164 here, as the flags say (the server also reads
// a national number in its company's region, which the phone does not
// know); an e-mail handle is left to the server.
func helloFault(cfg phoneConfig) error {
	if cfg.selectedSIM != "" && !device.ValidSelectedSIM(cfg.selectedSIM) {
		return fmt.Errorf("--selected-sim %q: want SIM1, SIM2 or BOTH", cfg.selectedSIM)
	}
	for _, set := range []struct {
		flag  string
		addrs []string
	}{{"--whatsapp", cfg.whatsapp}, {"--imessage", cfg.imessage}} {
		if len(set.addrs) > channel.MaxAnnounced {
			return fmt.Errorf("%s: at most %d, not %d", set.flag, channel.MaxAnnounced, len(set.addrs))
		}
		for _, a := range set.addrs {
			if set.flag == "--imessage" {
				if fault := phone.RecipientFault(a); fault != "" {
					return fmt.Errorf("%s %q: %s", set.flag, a, fault)
				}
				if strings.Contains(a, "@") {
					continue
				}
			}
			if _, err := numplan.Reported(a, ""); err != nil {
				want := "an E.164 number, such as +15550001111"
				if set.flag == "--imessage" {
					want = "an E.164 number or an e-mail address"
				}
				return fmt.Errorf("%s %q: want %s", set.flag, a, want)
			}
		}
	}
	return nil
}

// inboundFrame is the one inbound message of --inbound: an SMS, or with
// --inbound-to a WhatsApp or iMessage message to that number or handle.
func inboundFrame(cfg phoneConfig, clientID, text string) (proto.Inbound, error) {
	in := proto.Inbound{ClientID: clientID, From: cfg.inbound, Message: text}
	switch {
	case cfg.inboundTo == "":
		in.Channel, in.SIMSlot = proto.ChannelSMS, proto.SIM1
	case slices.Contains(cfg.whatsapp, cfg.inboundTo):
		in.Channel, in.To = proto.ChannelWhatsApp, cfg.inboundTo
	case slices.Contains(cfg.imessage, cfg.inboundTo):
		in.Channel, in.To = proto.ChannelIMessage, cfg.inboundTo
	default:
		return in, fmt.Errorf("--inbound-to %q must be one of the --whatsapp numbers or --imessage handles", cfg.inboundTo)
	}
	return in, nil
}

// jobLine describes a job as the virtual phone prints it.
func jobLine(s proto.Send) string {
	if s.Channel == proto.ChannelSMS || s.Channel == "" {
		return fmt.Sprintf("job %s: %s to %s from %s: %q", s.ID, s.Channel, s.To, s.SIMSlot, s.Message)
	}
	if s.MediaURL != "" {
		return fmt.Sprintf("job %s: %s %s to %s: %q (%s)", s.ID, s.Channel, s.ContentType, s.To, s.Message, s.MediaURL)
	}
	return fmt.Sprintf("job %s: %s %s to %s: %q", s.ID, s.Channel, s.ContentType, s.To, s.Message)
}
