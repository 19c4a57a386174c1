package main

import (
	"encoding/json"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestVirtualPhone walks the README: a server, a company, the virtual phone
// paired with the API key and carrying one inbound SMS, then a send that the
// phone reports delivered.
func TestVirtualPhone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	apiKey := createCompany(t, bin, dir)
	srv := startServer(t, bin, dir)

	phone := exec.Command(bin, "phone", "--server", srv.url, "--api-key", apiKey, "--inbound", "+15551234567", "hello from the phone")
	stdout := &syncbuf.Buffer{}
	phone.Stdout, phone.Stderr = stdout, stdout
	if err := phone.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = phone.Process.Kill(); _ = phone.Wait() })
	waitOutput(t, stdout, "inbound from +15551234567 stored as message")

	if code, body := get(t, srv.url+"/automation/latest-sms", apiKey); code != 200 || !strings.Contains(string(body), "hello from the phone") {
		t.Fatalf("latest-sms: got %d %s", code, body)
	}
	req, _ := http.NewRequest("POST", srv.url+"/chat/send", strings.NewReader(`{"device_fingerprint":"virtual-phone","phone":"+15557654321","message":"hi there","sim_slot":"SIM1"}`))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sent struct{ QueueID string }
	_ = json.NewDecoder(res.Body).Decode(&sent)
	res.Body.Close()
	waitOutput(t, stdout, "job "+sent.QueueID+": reported sent, then delivered")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := get(t, srv.url+"/chat/queue/"+sent.QueueID, apiKey)
		if strings.Contains(string(body), `"status":"delivered"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the send never showed delivered: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitOutput(t *testing.T, b *syncbuf.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output:\n%s", want, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
