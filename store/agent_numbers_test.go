package store

import (
	"strings"
	"testing"
)

// A number's public id is its channel's prefix and 20 base62 characters,
// fresh each time.
func TestNewNumberPublicID(t *testing.T) {
	t.Parallel()
	for channel, prefix := range map[string]string{ChannelNameWhatsApp: "wa_", ChannelNameIMessage: "im_"} {
		a, err := NewNumberPublicID(channel)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewNumberPublicID(channel)
		if err != nil {
			t.Fatal(err)
		}
		rest, ok := strings.CutPrefix(a, prefix)
		if !ok || len(rest) != 20 || strings.Trim(rest, base62) != "" {
			t.Errorf("%s: %q, want %s and 20 base62 characters", channel, a, prefix)
		}
		if a == b {
			t.Errorf("%s: two ids alike: %q", channel, a)
		}
	}
}
