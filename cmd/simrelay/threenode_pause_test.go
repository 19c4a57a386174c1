package main

import (
	"net/http"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// testPauseAcrossNodes: sends queued for a WhatsApp number while its agent
// is offline, the number paused on A: the agent linking to B gets none of
// them. Set active on C, they all reach it on B.
func testPauseAcrossNodes(t *testing.T, c *cluster3) {
	a, b, cc := c.nodes["a"], c.nodes["b"], c.nodes["c"]
	reg := pairDevice(t, b.url, c.apiKey, "paused-agent")
	hello := proto.Hello{WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550004444"}}}
	agent := &vphone{token: reg.DeviceToken, wire: map[string]int{}}
	agent.linkURL(t, b.url, hello).stop() // announces the number, then goes offline
	var waID string
	st, out := call(t, "GET", b.url+"/whatsapp/numbers", c.apiKey, nil)
	list, _ := out["numbers"].([]any)
	for _, n := range list {
		if n, _ := n.(map[string]any); n["phone"] == "+15550004444" {
			waID, _ = n["number_id"].(string)
		}
	}
	if st != http.StatusOK || waID == "" {
		t.Fatalf("the agent's number is not listed: %d %v", st, out)
	}
	var ids []string
	for i := range 3 {
		st, out := call(t, "POST", a.url+"/whatsapp/send", c.apiKey, map[string]any{"number_id": waID, "to": "+15551234567", "content": "held"})
		id, _ := out["id"].(string)
		if st != http.StatusAccepted || id == "" {
			t.Fatalf("send %d: %d %v", i, st, out)
		}
		ids = append(ids, id)
	}
	// A short gap, so that the resumed sends arrive within the test's wait.
	if st, out := call(t, "PATCH", a.url+"/whatsapp/numbers/"+waID, c.apiKey, map[string]any{"status": "paused", "gap_seconds": map[string]any{"min": 0, "max": 0.2}}); st != http.StatusOK {
		t.Fatalf("pause on A: %d %v", st, out)
	}
	l := agent.linkURL(t, b.url, hello)
	defer l.stop()
	// The link's hello reads the number's queue on B at once.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		for _, id := range ids {
			if agent.got(id) {
				t.Fatalf("send %s of the number paused on A reached its agent on B", id)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, out := call(t, "PATCH", cc.url+"/whatsapp/numbers/"+waID, c.apiKey, map[string]any{"status": "active"}); st != http.StatusOK {
		t.Fatalf("resume on C: %d %v", st, out)
	}
	waitFor(t, "the held sends at the agent on B", func() bool {
		for _, id := range ids {
			if !agent.got(id) {
				return false
			}
		}
		return true
	})
}
