package channel

import (
	"fmt"
	"testing"

	"github.com/simrelay/simrelay/pacing"
)

// A config's zeros take the defaults, but an Exact config's are meant: a
// cap of 0 is no cap there and passes Validate, and Validate's refusal
// says so.
func TestConfigZerosAndExact(t *testing.T) {
	t.Parallel()
	var c Config
	c.Defaults()
	if c.WhatsApp.Caps.PerMinute != pacing.DefaultWhatsAppPerMinute || c.IMessage.Caps.PerDay != pacing.DefaultIMessagePerDay ||
		c.WhatsApp.Gap.Max != pacing.DefaultWhatsAppGapMax || c.Warmup != pacing.DefaultWarmup || c.MessageTTL != DefaultMessageTTL {
		t.Fatalf("a zero config after Defaults: %+v, want the defaults", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}

	exact := Config{Exact: true}
	exact.Defaults()
	if exact != (Config{Exact: true}) {
		t.Fatalf("an Exact config after Defaults: %+v, want its zeros kept", exact)
	}
	if err := exact.Validate(); err != nil {
		t.Fatalf("an Exact config of zeros (no caps, no gap): %v", err)
	}

	want := fmt.Sprintf("channel: imessage caps must be 0 (no cap) to %d", pacing.MaxCap)
	for _, v := range []int{-1, pacing.MaxCap + 1} {
		bad := Config{Exact: true}
		bad.IMessage.Caps.PerHour = v
		if err := bad.Validate(); err == nil || err.Error() != want {
			t.Errorf("an iMessage cap of %d: %v, want %q", v, err, want)
		}
	}
}
