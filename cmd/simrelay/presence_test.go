package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// A phone linked when the server died, and not back within the grace after
// the restart, is reported offline then (device.offline); one back in time
// raises nothing.
func TestDeviceOfflineAcrossARestart(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	rc := webhooktest.NewReceiver(t, false, nil)
	flags := []string{"--webhook-allow-private", "--device-offline-grace", "2s"}
	srv := startServer(t, bin, st, flags...)

	body, _ := json.Marshal(map[string]any{"webhooks": []map[string]any{{"url": rc.URL + "/events", "events": []string{"device.online", "device.offline"}}}})
	req, _ := http.NewRequest("PUT", srv.url+"/webhooks/inbound-sms", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := testhttp.Client.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("PUT /webhooks/inbound-sms: %v %v", res, err)
	}
	res.Body.Close()

	// Two phones link; each is reported online.
	regs := map[string]client.Registration{}
	stops := map[string]func(){}
	link := func(url, fp string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		// The restarted server listens on another port than the one of the registration's ws_url.
		p := client.New(client.Config{WSURL: "ws" + strings.TrimPrefix(url, "http") + "/device/ws", Token: regs[fp].DeviceToken})
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		stops[fp] = sync.OnceFunc(func() { cancel(); <-done })
		t.Cleanup(stops[fp])
		poll.Until(t, fp+" links", p.Connected)
	}
	for _, fp := range []string{"gone-phone", "back-phone"} {
		code, err := pairingCode(context.Background(), testhttp.Client, srv.url, apiKey)
		if err != nil {
			t.Fatal(err)
		}
		if regs[fp], err = client.Register(context.Background(), testhttp.Client, srv.url, client.RegisterInput{PairingCode: code, DeviceFingerprint: fp}); err != nil {
			t.Fatal(err)
		}
		link(srv.url, fp)
	}
	events := func(typ string) map[string]int { return deviceEvents(rc, typ) }
	poll.Until(t, "both phones reported online", func() bool { n := events("device.online"); return n["gone-phone"] == 1 && n["back-phone"] == 1 })

	// The server dies with both linked; the phones stop trying.
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()
	stops["gone-phone"]()
	stops["back-phone"]()

	// On the restart one phone comes back at once, the other never.
	srv = startServer(t, bin, st, flags...)
	link(srv.url, "back-phone")
	poll.Until(t, "device.offline for the phone that did not come back", func() bool { return events("device.offline")["gone-phone"] == 1 })
	// Both graces began at the start and have ended: nothing for the one that came back.
	if n := events("device.offline")["back-phone"]; n != 0 {
		t.Errorf("the phone back within the grace was reported offline %d times", n)
	}
}

// deviceEvents counts the device events of type typ the receiver got, by
// device fingerprint.
func deviceEvents(rc *webhooktest.Receiver, typ string) map[string]int {
	n := map[string]int{}
	for _, r := range rc.Requests() {
		var ev struct {
			Event string `json:"type"`
			Data  struct {
				Device string `json:"device_fingerprint"`
			} `json:"data"`
		}
		if json.Unmarshal(r.Body, &ev) == nil && ev.Event == typ {
			n[ev.Data.Device]++
		}
	}
	return n
}
