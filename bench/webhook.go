package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// webhookLatency runs a local receiver, points the company's webhook at it,
// and times inbound messages from a phone's frame to the receiver, until
// the phase's end or ctx's.
func webhookLatency(ctx context.Context, api *apiClient, f *fleet, rate int, d time.Duration) ([]time.Duration, string) {
	var mu sync.Mutex
	started := map[string]time.Time{}
	var lat []time.Duration
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err.Error()
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Data struct {
				Message string `json:"message"`
			} `json:"data"`
		}
		raw, _ := io.ReadAll(r.Body)
		now := time.Now()
		if json.Unmarshal(raw, &body) == nil {
			mu.Lock()
			if t, ok := started[body.Data.Message]; ok {
				lat = append(lat, now.Sub(t))
				delete(started, body.Data.Message)
			}
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	code, body, err := api.do("PUT", "/webhooks/inbound-sms", map[string]any{"webhooks": []map[string]any{{"url": "http://" + ln.Addr().String() + "/hook", "active": true}}})
	if err != nil || code != http.StatusOK {
		return nil, fmt.Sprintf("(not measured: PUT /webhooks/inbound-sms answered %d %s %v)", code, body, err)
	}
	total := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range total {
		if !sleep(ctx, time.Until(start.Add(time.Duration(i)*interval))) {
			break
		}
		text := fmt.Sprintf("inbound %d", i)
		mu.Lock()
		started[text] = time.Now()
		mu.Unlock()
		f.phones[i%len(f.phones)].Receive(proto.Inbound{ClientID: fmt.Sprint("bench-", i), From: "+15557654321", Message: text, SIMSlot: proto.SIM1})
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		if n >= total || !sleep(ctx, 20*time.Millisecond) {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	note := ""
	if len(lat) < total {
		note = fmt.Sprintf("(%d of %d deliveries arrived)", len(lat), total)
	}
	return append([]time.Duration(nil), lat...), note
}
