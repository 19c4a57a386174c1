package agent

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// FuzzLoadConfig reads fuzzed bytes as the agent's configuration (torn
// JSON, garbage, NUL, bytes that are not UTF-8, a token or address that
// pairing never writes): nothing panics, and a configuration taken holds a
// token that can go in an Authorization header and a ws:// or wss://
// address, so that the link is never retried forever with a request that
// cannot be made; any other file is refused with an error naming it.
func FuzzLoadConfig(f *testing.F) {
	whole, _ := json.Marshal(ConfigFile{Server: "https://sms.example.com", WSURL: "wss://sms.example.com/device/ws",
		DeviceToken: "dt_" + strings.Repeat("A", 43), DeviceFingerprint: "agent-1", Salt: "s1"})
	for _, s := range []string{
		string(whole), string(whole[:len(whole)/2]), "", "\x00", "null", "\xff{}", string(whole) + "{",
		strings.Replace(string(whole), "dt_", "dt_\\r\\n", 1), strings.Replace(string(whole), "dt_", "dt_\xff", 1),
		strings.Replace(string(whole), "wss://", "https://", 1), strings.Replace(string(whole), "wss://", "wss://\\u0000", 1),
		strings.Replace(string(whole), "dt_", "sk_", 1), strings.Repeat(" ", 70000) + string(whole),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "agent.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := LoadConfig(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("%q: error %q does not name the file", data, err)
			}
			return
		}
		if !httpguts.ValidHeaderFieldValue("Bearer " + c.DeviceToken) {
			t.Fatalf("%q: token %q cannot go in a header", data, c.DeviceToken)
		}
		if u, err := url.Parse(c.WSURL); err != nil || u.Scheme != "ws" && u.Scheme != "wss" || u.Host == "" {
			t.Fatalf("%q: ws_url %q", data, c.WSURL)
		}
	})
}
