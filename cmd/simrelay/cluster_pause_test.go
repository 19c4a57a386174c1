package main

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
)

// A node paused for longer than the live window (SIGSTOP: a frozen VM, a
// stall) is taken for dead by the others, whose sweep ends its phone's
// link in the registry, while the phone stays linked to it. Once it runs
// again and its beats are steady, it records that link as open again: the
// device reads online on every node, over the link that never broke.
// Before, it read offline on the other nodes (and was reported offline
// after the grace) until the phone happened to link again.
func TestClusterPausedNodeKeepsItsLinks(t *testing.T) {
	clusterTest(t)
	bin := buildBinary(t)
	db := pgtest.URL(t)
	bus := natstest.Start(t)
	key := createCompany(t, bin, testStore{dir: t.TempDir(), databaseURL: db})
	flags := []string{"--nats-url", bus, "--rate-general", "1000000/1m", "--link-sweep", "500ms", "--public-url", "http://127.0.0.1", "--node-live-window", testLiveWindow}
	a := startServer(t, bin, testStore{dir: t.TempDir(), databaseURL: db}, append(flags, "--node-name", "a")...)
	b := startServer(t, bin, testStore{dir: t.TempDir(), databaseURL: db}, append(flags, "--node-name", "b")...)
	reg := pairDevice(t, a.url, key, "paused-phone")
	l := (&vphone{token: reg.DeviceToken, wire: map[string]int{}}).linkTo(t, a)
	onlineOnB := func() bool {
		st, out := call(t, "GET", b.url+"/device/list", key, nil)
		devs, _ := out["devices"].([]any)
		if st != http.StatusOK || len(devs) != 1 {
			t.Fatalf("b's device list: %d %v", st, out)
		}
		online, _ := devs[0].(map[string]any)["online"].(bool)
		return online
	}
	poll.Within(t, 10*time.Second, "the phone on a reads online on b", onlineOnB)

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// b ends a's link once a's beat is older than the live window and b's
	// own beats ran for the window
	// (a's beat too old alone reads the device offline on b, until a beats
	// again: the link's end in the registry is what stays).
	poll.Within(t, 40*time.Second, "b's sweep ends the paused a's link", func() bool {
		return logLine(b.stderr.String(), "the device's node is dead; its link counts as ended") != ""
	})
	if onlineOnB() {
		t.Fatal("the phone reads online on b while a is paused")
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// a beats again at once; its next sweep reopens.
	poll.Within(t, 30*time.Second, "the phone, still linked to a, reads online on b again", onlineOnB)
	l.mu.Lock()
	closes := l.closes
	l.mu.Unlock()
	if len(closes) != 0 {
		t.Fatalf("the phone's link closed (%v): it linked again, so this says nothing of the link kept", closes)
	}
	id := sendTo(t, b.url, key, "paused-phone", "after the pause")
	poll.Within(t, 10*time.Second, "a send on b at the phone on a", func() bool { return l.got(id) })
}

// sendTo sends one SMS to the device through the server at url and answers
// its queue id.
func sendTo(t *testing.T, url, key, fingerprint, text string) string {
	t.Helper()
	st, out := call(t, "POST", url+"/chat/send", key, map[string]any{"device_fingerprint": fingerprint, "phone": "+15551234567", "message": text})
	id, _ := out["queueId"].(string)
	if st != http.StatusOK || id == "" {
		t.Fatalf("send %q: %d %v", text, st, out)
	}
	return id
}
