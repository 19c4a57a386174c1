package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/pacing"
)

// pacingFlags are the anti-ban governor's defaults for WhatsApp numbers and
// iMessage handles (docs/pacing.md says why each default is what it is);
// PATCH /whatsapp/numbers/{id} and /imessage/handles/{id} override them per
// number.
func pacingFlags(fs *flag.FlagSet, cfg *channel.Config) {
	fs.IntVar(&cfg.WhatsApp.Caps.PerMinute, "whatsapp-per-minute", pacing.DefaultWhatsAppPerMinute, "sends one WhatsApp number may take per rolling minute (halved during its warm-up)")
	fs.IntVar(&cfg.WhatsApp.Caps.PerHour, "whatsapp-per-hour", pacing.DefaultWhatsAppPerHour, "sends one WhatsApp number may take per rolling hour (halved during its warm-up)")
	fs.IntVar(&cfg.WhatsApp.Caps.PerDay, "whatsapp-per-day", pacing.DefaultWhatsAppPerDay, "sends one WhatsApp number may take per rolling day (halved during its warm-up)")
	fs.DurationVar(&cfg.WhatsApp.Gap.Min, "whatsapp-gap-min", pacing.DefaultWhatsAppGapMin, "shortest random pause between two dispatches of one WhatsApp number")
	fs.DurationVar(&cfg.WhatsApp.Gap.Max, "whatsapp-gap-max", pacing.DefaultWhatsAppGapMax, "longest random pause between two dispatches of one WhatsApp number")
	fs.IntVar(&cfg.IMessage.Caps.PerMinute, "imessage-per-minute", pacing.DefaultIMessagePerMinute, "sends one iMessage handle may take per rolling minute (halved during its warm-up)")
	fs.IntVar(&cfg.IMessage.Caps.PerHour, "imessage-per-hour", pacing.DefaultIMessagePerHour, "sends one iMessage handle may take per rolling hour (halved during its warm-up)")
	fs.IntVar(&cfg.IMessage.Caps.PerDay, "imessage-per-day", pacing.DefaultIMessagePerDay, "sends one iMessage handle may take per rolling day (halved during its warm-up)")
	fs.DurationVar(&cfg.IMessage.Gap.Min, "imessage-gap-min", pacing.DefaultIMessageGapMin, "shortest random pause between two dispatches of one iMessage handle")
	fs.DurationVar(&cfg.IMessage.Gap.Max, "imessage-gap-max", pacing.DefaultIMessageGapMax, "longest random pause between two dispatches of one iMessage handle")
	fs.DurationVar(&cfg.Warmup, "number-warmup", pacing.DefaultWarmup, "how long a new WhatsApp number's or iMessage handle's caps stay halved")
}

// validatePacing checks the governor's flags; the error names the flag.
func validatePacing(cfg channel.Config) error {
	for _, p := range []struct {
		prefix string
		p      channel.Pacing
	}{{"whatsapp", cfg.WhatsApp}, {"imessage", cfg.IMessage}} {
		for _, c := range []struct {
			name string
			v    int
		}{{"per-minute", p.p.Caps.PerMinute}, {"per-hour", p.p.Caps.PerHour}, {"per-day", p.p.Caps.PerDay}} {
			if c.v < 1 || c.v > pacing.MaxCap {
				return fmt.Errorf("%s %d: want 1 to %d", both(p.prefix+"-"+c.name), c.v, pacing.MaxCap)
			}
		}
		if p.p.Gap.Min < 0 || p.p.Gap.Min > time.Hour {
			return fmt.Errorf("%s %s: want 0s to 1h", both(p.prefix+"-gap-min"), p.p.Gap.Min)
		}
		if p.p.Gap.Max < p.p.Gap.Min || p.p.Gap.Max > time.Hour {
			return fmt.Errorf("%s %s: want at least %s and at most 1h", both(p.prefix+"-gap-max"), p.p.Gap.Max, both(p.prefix+"-gap-min"))
		}
	}
	if cfg.Warmup < 0 {
		return fmt.Errorf("%s %s: want 0s or more", both("number-warmup"), cfg.Warmup)
	}
	return nil
}
