package main

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/syncbuf"
)

// TestGovernorSurvivesRestart: four sends on a new WhatsApp number (caps
// halved: four a minute), a restart of the server on the same data, and the
// fifth still answers 429 number_capped with a Retry-After within the minute
// (and the second the first send fell in).
func TestGovernorSurvivesRestart(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	srv := startServer(t, bin, st)
	waID, _ := pairAndAnnounce(t, srv.url, apiKey, "wa-agent", proto.Hello{WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550001111"}}, IMessage: []proto.IMessageHandle{{Handle: "agent@example.com"}}})
	send := func(url string) *http.Response {
		res, _ := post(t, url+"/whatsapp/send", apiKey, `{"number_id":"`+waID+`","to":"+15551234567","content":"hi"}`)
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
	srv = startServer(t, bin, st)
	res := send(srv.url)
	ra, _ := strconv.Atoi(res.Header.Get("Retry-After"))
	if res.StatusCode != http.StatusTooManyRequests || ra < 1 || ra > 61 {
		t.Fatalf("fifth send after the restart: got %d with Retry-After %q, want 429 within 61 s", res.StatusCode, res.Header.Get("Retry-After"))
	}
}

// TestVirtualAgent: `simrelay phone --whatsapp N --imessage H` announces
// both, delivers --inbound on WhatsApp to --inbound-to, and answers WhatsApp
// and iMessage jobs like SMS.
func TestVirtualAgent(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	srv := startServer(t, bin, st)
	phone := exec.Command(bin, "phone", "--server", srv.url, "--api-key", apiKey, "--token-file", filepath.Join(t.TempDir(), "phone.json"),
		"--whatsapp", "+15550001111", "--imessage", "Ana@Example.com", "--inbound", "+15557654321", "hello on WhatsApp", "--inbound-to", "+15550001111") // flags after the text, as the README writes them
	stdout := &syncbuf.Buffer{}
	phone.Stdout, phone.Stderr = stdout, stdout
	if err := phone.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = phone.Process.Kill(); _ = phone.Wait() })
	waitOutput(t, stdout, "whatsapp inbound from +15557654321 to +15550001111 stored as message")

	var wa struct {
		Numbers []struct {
			NumberID string `json:"number_id"`
		}
	}
	var im struct {
		Handles []struct {
			HandleID string `json:"handle_id"`
			Handle   string `json:"handle"`
		}
	}
	_, body := get(t, srv.url+"/whatsapp/numbers", apiKey)
	_ = json.Unmarshal(body, &wa)
	_, body = get(t, srv.url+"/imessage/handles", apiKey)
	_ = json.Unmarshal(body, &im)
	if len(wa.Numbers) != 1 || len(im.Handles) != 1 || im.Handles[0].Handle != "ana@example.com" {
		t.Fatalf("numbers %+v, handles %+v", wa, im)
	}
	if _, body := get(t, srv.url+"/whatsapp/messages?number_id="+wa.Numbers[0].NumberID, apiKey); !strings.Contains(string(body), "hello on WhatsApp") {
		t.Fatalf("the inbound WhatsApp message is not in the number's history: %s", body)
	}
	for _, c := range []struct{ path, body, read string }{
		{"/whatsapp/send", `{"number_id":"` + wa.Numbers[0].NumberID + `","to":"+15557654321","content":"hi there"}`, "/whatsapp/messages/"},
		{"/imessage/send", `{"handle_id":"` + im.Handles[0].HandleID + `","to":"bob@example.com","type":"image","media_url":"https://cdn.example.com/a.png"}`, "/imessage/messages/"},
	} {
		res, raw := post(t, srv.url+c.path, apiKey, c.body)
		var sent struct{ ID string }
		_ = json.Unmarshal(raw, &sent)
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: got %d", c.path, res.StatusCode)
		}
		waitOutput(t, stdout, "job "+sent.ID+": reported sent, then delivered")
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, body := get(t, srv.url+c.read+sent.ID, apiKey)
			if strings.Contains(string(body), `"status":"delivered"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the send never showed delivered: %s", body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestNoWarmupNoGap: --number-warmup 0s is no warm-up and a gap of 0s to 0s
// no gap, as docs/pacing.md says; the service read both zeros as "the
// default" (a new number's caps halved for 7 days) and the gap was kept
// from that by a nanosecond, which GET /whatsapp/numbers showed as 1e-09.
func TestNoWarmupNoGap(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	srv := startServer(t, bin, st, "--number-warmup", "0s", "--whatsapp-gap-min", "0s", "--whatsapp-gap-max", "0s")
	pairAndAnnounce(t, srv.url, apiKey, "wa-agent", proto.Hello{WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550001111"}}, IMessage: []proto.IMessageHandle{{Handle: "agent@example.com"}}})
	status, body := get(t, srv.url+"/whatsapp/numbers", apiKey)
	var list struct {
		Numbers []struct {
			Warmup bool `json:"warmup"`
			Caps   struct {
				PerMinute int `json:"per_minute"`
			} `json:"caps"`
			Gap struct {
				Min, Max float64
			} `json:"gap_seconds"`
		} `json:"numbers"`
	}
	if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil || len(list.Numbers) != 1 {
		t.Fatalf("GET /whatsapp/numbers: %d %s", status, body)
	}
	n := list.Numbers[0]
	if n.Warmup || n.Caps.PerMinute != 8 || n.Gap.Min != 0 || n.Gap.Max != 0 {
		t.Fatalf("a new number under --number-warmup 0s and a 0s to 0s gap: %s; want no warm-up, 8 a minute, a gap of 0 to 0", body)
	}
}

// TestGovernorForgetsAClosedCompany: a WhatsApp number that sent holds
// its pacing state on the server (simrelay_governor_numbers), until its
// company is closed: the state goes with the company's removal, not at
// the next restart.
func TestGovernorForgetsAClosedCompany(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	srv := startServer(t, bin, st)
	waID, _ := pairAndAnnounce(t, srv.url, apiKey, "wa-closing", proto.Hello{WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550001111"}}, IMessage: []proto.IMessageHandle{{Handle: "agent@example.com"}}})
	if res, body := post(t, srv.url+"/whatsapp/send", apiKey, `{"number_id":"`+waID+`","to":"+15551234567","content":"hi"}`); res.StatusCode != http.StatusAccepted {
		t.Fatalf("send: %d %s", res.StatusCode, body)
	}
	held := func(n string) bool {
		_, body := get(t, srv.url+"/metrics", "")
		return strings.Contains(string(body), "\nsimrelay_governor_numbers "+n+"\n")
	}
	if !held("1") {
		t.Fatal("after a send: simrelay_governor_numbers is not 1, want the number's state held")
	}
	closeCompany(t, srv.url, "you@example.com", "Acme")
	poll.Within(t, 10*time.Second, "the closed company's number gone from the governor", func() bool {
		return held("0")
	})
}
