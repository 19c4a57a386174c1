package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// TestCrashLosesNoAnsweredSend kills the server with SIGKILL in the middle
// of a burst of concurrent sends (SMS, WhatsApp and iMessage), restarts it
// on the same data directory, and wants every send that was answered 2xx to
// reach the phone (an agent holding a WhatsApp number and an iMessage handle).
func TestCrashLosesNoAnsweredSend(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	// The limits would refuse a burst and the gap slow the drain; this test
	// is about durability.
	limits := []string{"--rate-general", "1000000/1m"}
	for _, ch := range []string{"whatsapp", "imessage"} {
		limits = append(limits, "--"+ch+"-per-minute", "65535", "--"+ch+"-per-hour", "65535", "--"+ch+"-per-day", "65535", "--"+ch+"-gap-min", "0s", "--"+ch+"-gap-max", "0s")
	}
	srv := startServer(t, bin, st, limits...)
	reg := pairDevice(t, srv.url, apiKey, "crash-phone")
	hello := proto.Hello{WhatsApp: []proto.WhatsAppNumber{{Phone: "+15550001111"}}, IMessage: []proto.IMessageHandle{{Handle: "crash@example.com"}}}
	waID, imID := announce(t, srv.url, reg, apiKey, hello)
	// Which route reads each answered send back.
	var routeOf sync.Map

	// Eight senders fire until the server dies (bounded: 20,000 tries in all).
	var answered sync.Map
	var count, tries atomic.Int64
	killed := make(chan struct{})
	var wg sync.WaitGroup
	hc := &http.Client{Transport: testhttp.Transport, Timeout: 10 * time.Second}
	for w := range 8 {
		wg.Go(func() {
			for i := 0; tries.Add(1) <= 20000; i++ {
				path, fields := "/chat/send", map[string]string{"device_fingerprint": "crash-phone", "phone": "+15551234567", "message": fmt.Sprintf("w%d-%d", w, i)}
				read := "/chat/queue/"
				switch w % 3 {
				case 1:
					path, fields = "/whatsapp/send", map[string]string{"number_id": waID, "to": "+15551234567", "content": fmt.Sprintf("w%d-%d", w, i)}
					read = "/whatsapp/messages/"
				case 2:
					path, fields = "/imessage/send", map[string]string{"handle_id": imID, "to": "bob@example.com", "content": fmt.Sprintf("w%d-%d", w, i)}
					read = "/imessage/messages/"
				}
				body, _ := json.Marshal(fields)
				req, _ := http.NewRequest("POST", srv.url+path, bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+apiKey)
				req.Header.Set("Content-Type", "application/json")
				res, err := hc.Do(req)
				if err != nil {
					select {
					case <-killed:
						return
					default:
						continue
					}
				}
				var ans struct{ QueueID, ID string }
				_ = json.NewDecoder(res.Body).Decode(&ans)
				res.Body.Close()
				id := ans.QueueID + ans.ID
				if (res.StatusCode == http.StatusOK || res.StatusCode == http.StatusAccepted) && id != "" {
					routeOf.Store(id, read)
					answered.Store(id, true)
					count.Add(1)
				}
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for count.Load() < 500 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	close(killed)
	_ = srv.cmd.Wait()
	wg.Wait()
	n := int(count.Load())
	if n == 0 {
		t.Fatal("no send was answered before the kill")
	}

	// Back on the same data: the phone must get every answered send.
	srv = startServer(t, bin, st, limits...)
	var got sync.Map
	var received atomic.Int64
	// The restarted server has a new port: the phone follows it.
	wsURL := "ws" + strings.TrimPrefix(srv.url, "http") + "/device/ws"
	// It behaves like a real phone: each job is acked, then reported sent
	// and delivered at once, so the backlog drains at full speed and no
	// link may end on the way (a flood close would hold the drain up).
	var phone *client.Phone
	var closes sync.Map
	phone = client.New(client.Config{WSURL: wsURL, Token: reg.DeviceToken, Hello: hello, BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnJob: func(s proto.Send) {
			if _, dup := got.LoadOrStore(s.ID, true); !dup {
				received.Add(1)
			}
			phone.Report(s.ID, proto.StatusSent, "")
			phone.Report(s.ID, proto.StatusDelivered, "")
		},
		OnRetry: func(err error, _ time.Duration) { closes.Store(err.Error(), true) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- phone.Run(ctx) }()
	defer func() { cancel(); <-done }()

	survived := func() int {
		k := 0
		answered.Range(func(id, _ any) bool {
			if _, ok := got.Load(id); ok {
				k++
			}
			return true
		})
		return k
	}
	deadline = time.Now().Add(60 * time.Second)
	for survived() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	s := survived()
	t.Logf("crash test: %d sends answered 2xx before SIGKILL, %d of them reached the phone after the restart (%d jobs in all)", n, s, received.Load())
	fmt.Printf("crash test: answered %d, survived %d\n", n, s)
	if s != n {
		t.Fatalf("%d answered sends were lost", n-s)
	}
	closes.Range(func(err, _ any) bool {
		t.Errorf("the link ended while draining: %v", err)
		return true
	})
	// Every report was stored (status_acked), and the sends end delivered.
	for phone.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := phone.Pending(); n > 0 {
		t.Fatalf("%d reports were never acknowledged", n)
	}
	// One of each channel shows the reports took effect; Pending showed they all arrived.
	seen := map[string]bool{}
	for id := range answered.Range {
		read, _ := routeOf.Load(id)
		if seen[read.(string)] {
			continue
		}
		seen[read.(string)] = true
		if _, body := get(t, srv.url+read.(string)+id.(string), apiKey); !strings.Contains(string(body), `"status":"delivered"`) {
			t.Fatalf("send %s: got %s, want it delivered", id, body)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("sends of %d channels were answered, want 3", len(seen))
	}
}

// announce links the agent once so that its hello announces the number and
// handle, and returns their ids.
// pairAndAnnounce pairs a device (pairDevice) and says its hello
// (announce): the ids of its first WhatsApp number and iMessage handle.
func pairAndAnnounce(t *testing.T, url, apiKey, fingerprint string, hello proto.Hello) (waID, imID string) {
	t.Helper()
	return announce(t, url, pairDevice(t, url, apiKey, fingerprint), apiKey, hello)
}

func announce(t *testing.T, url string, reg client.Registration, apiKey string, hello proto.Hello) (waID, imID string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	phone := client.New(client.Config{WSURL: reg.WSURL, Token: reg.DeviceToken, Hello: hello})
	done := make(chan error, 1)
	go func() { done <- phone.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for !phone.Connected() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	var wa struct {
		Numbers []struct {
			NumberID string `json:"number_id"`
		}
	}
	var im struct {
		Handles []struct {
			HandleID string `json:"handle_id"`
		}
	}
	_, body := get(t, url+"/whatsapp/numbers", apiKey)
	_ = json.Unmarshal(body, &wa)
	_, body = get(t, url+"/imessage/handles", apiKey)
	_ = json.Unmarshal(body, &im)
	if len(wa.Numbers) != 1 || len(im.Handles) != 1 {
		t.Fatalf("the agent's number and handle are not listed")
	}
	return wa.Numbers[0].NumberID, im.Handles[0].HandleID
}
