package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"syscall"
	"testing"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
)

// TestGovernorSurvivesRestart: four sends on a new WhatsApp number (caps
// halved: four a minute), a restart of the server on the same data, and the
// fifth still answers 429 number_capped with a Retry-After within the minute.
func TestGovernorSurvivesRestart(t *testing.T) {
	bin, dir, apiKey := companyStore(t)
	srv := startServer(t, bin, dir)
	code, err := pairingCode(context.Background(), srv.url, apiKey)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := client.Register(context.Background(), nil, srv.url, client.RegisterInput{PairingCode: code, DeviceFingerprint: "wa-agent"})
	if err != nil {
		t.Fatal(err)
	}
	waID, _ := announce(t, srv.url, reg, apiKey, proto.Hello{WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550001111"}}, IMessage: []proto.IMessageHandle{{Handle: "agent@example.com"}}})
	send := func(url string) *http.Response {
		body, _ := json.Marshal(map[string]string{"number_id": waID, "to": "+15551234567", "content": "hi"})
		req, _ := http.NewRequest("POST", url+"/whatsapp/send", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	for i := range 4 {
		if res := send(srv.url); res.StatusCode != http.StatusAccepted {
			t.Fatalf("send %d: got %d, want 202", i+1, res.StatusCode)
		}
	}
	// A crash, not a goodbye: the windows come back from the store.
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()
	srv = startServer(t, bin, dir)
	res := send(srv.url)
	ra, _ := strconv.Atoi(res.Header.Get("Retry-After"))
	if res.StatusCode != http.StatusTooManyRequests || ra < 1 || ra > 60 {
		t.Fatalf("fifth send after the restart: got %d with Retry-After %q, want 429 within 60 s", res.StatusCode, res.Header.Get("Retry-After"))
	}
}
