package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeTermux writes termux-sms-send, termux-sms-list,
// termux-telephony-deviceinfo and termux-battery-status (it prints
// dir/battery.json) into dir/bin. termux-sms-send records each
// call in dir/calls (NAME.args: one argument a line, NAME.text: its stdin,
// NAME.when: the local time, as Android's sent box has it); when the file
// dir/block exists it removes it and then waits for a line on dir/fifo,
// so a test can hold one send in the middle. It answers the number
// +15550009999 as Termux:API answers without the SMS permission.
// termux-sms-list prints dir/inbox.json for -t inbox and, for -t sent, the
// recorded calls; it logs each call to dir/list.log.
func fakeTermux(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"calls"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, "inbox.json"), "[]\n")
	writeScript(t, dir, "termux-sms-send", `d="$FAKE_DIR"
case "$*" in *+15550009999*)
  cat >/dev/null
  echo "Please grant the following permissions to use this command: android.permission.SEND_SMS"
  exit 0;;
esac
f=$(mktemp "$d/calls/send.XXXXXX")
cat > "$f.text"
date '+%Y-%m-%d %H:%M:%S' > "$f.when"
printf '%s\n' "$@" > "$f.tmp"
mv "$f.tmp" "$f.args"
if [ -e "$d/block" ]; then
  rm -f "$d/block"
  read line < "$d/fifo"
fi
exit 0
`)
	writeScript(t, dir, "termux-sms-list", `d="$FAKE_DIR"
echo "$*" >> "$d/list.log"
type=all; off=0
while [ $# -gt 0 ]; do
  case "$1" in -t) type=$2; shift;; -o) off=$2; shift;; esac
  shift
done
if [ "$off" != 0 ]; then echo '[]'; exit 0; fi
if [ "$type" = inbox ]; then cat "$d/inbox.json"; exit 0; fi
printf '['; sep=''; i=0
for a in "$d"/calls/*.args; do
  [ -e "$a" ] || continue
  i=$((i+1)); b=${a%.args}
  printf '%s{"_id":%d,"threadid":%d,"type":"sent","read":true,"number":"%s","received":"%s","body":"%s"}' "$sep" "$i" "$i" "$(sed -n 2p "$a")" "$(cat "$b.when")" "$(cat "$b.text")"
  sep=','
done
printf ']\n'
`)
	writeFile(t, filepath.Join(dir, "battery.json"), `{"health":"GOOD","percentage":87,"plugged":"PLUGGED_USB","status":"CHARGING","temperature":29.5,"current":350000}`+"\n")
	writeScript(t, dir, "termux-battery-status", `cat "$FAKE_DIR/battery.json"
`)
	writeScript(t, dir, "termux-telephony-deviceinfo", `cat <<'EOF'
{
  "data_enabled": true,
  "data_activity": "none",
  "data_state": "connected",
  "device_id": null,
  "device_software_version": "01",
  "phone_count": 1,
  "phone_type": "gsm",
  "network_operator": "310260",
  "network_operator_name": "T-Mobile",
  "network_country_iso": "us",
  "network_type": "lte",
  "network_roaming": false,
  "sim_country_iso": "us",
  "sim_operator": "310260",
  "sim_operator_name": "T-Mobile",
  "sim_serial_number": null,
  "sim_subscriber_id": null,
  "sim_state": "ready"
}
EOF
`)
	return dir
}

// sendCall is one recorded termux-sms-send call.
type sendCall struct{ args, text string }

func sendCalls(t *testing.T, dir string) []sendCall {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "calls", "*.args"))
	var out []sendCall
	for _, f := range files {
		a, err1 := os.ReadFile(f)
		txt, err2 := os.ReadFile(strings.TrimSuffix(f, ".args") + ".text")
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, sendCall{args: strings.Join(strings.Fields(string(a)), " "), text: string(txt)})
	}
	return out
}

func countText(calls []sendCall, text string) int {
	n := 0
	for _, c := range calls {
		if c.text == text {
			n++
		}
	}
	return n
}

// inboxJSON is termux-sms-list's output for messages (id, number, body).
func inboxJSON(msgs ...[3]string) string {
	var rows []string
	for i := len(msgs) - 1; i >= 0; i-- { // newest first, as the tool prints them
		m := msgs[i]
		rows = append(rows, fmt.Sprintf(`{"_id":%s,"threadid":1,"type":"inbox","read":false,"number":%q,"received":%q,"body":%q}`,
			m[0], m[1], time.Now().Format(time.DateTime), m[2]))
	}
	return "[" + strings.Join(rows, ",") + "]\n"
}

// webhookSink counts the webhook deliveries that mention a text.
type webhookSink struct {
	mu     sync.Mutex
	bodies []string
}

func (w *webhookSink) count(text string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, b := range w.bodies {
		if strings.Contains(b, text) {
			n++
		}
	}
	return n
}

func newWebhookSink(t *testing.T, s *server) *webhookSink {
	w := &webhookSink{}
	rc := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.bodies = append(w.bodies, string(b))
		w.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	s.must("PUT", "/webhooks/inbound-sms", map[string]any{"webhooks": []any{map[string]any{"url": rc.URL + "/hook"}}}, http.StatusOK)
	return w
}

// fakeTermuxHeld is fakeTermux whose termux-sms-send holds each send
// inside the tool until release (which runs at the test's end if not
// called).
func fakeTermuxHeld(t *testing.T) (fake string, release func()) {
	t.Helper()
	fake = fakeTermux(t)
	fifo := filepath.Join(fake, "fifo")
	if err := exec.Command("mkfifo", fifo).Run(); err != nil {
		t.Fatal(err)
	}
	// The test holds the FIFO open from the start, so that what release
	// writes waits in it for the fake tool, however late the tool opens it:
	// written by an open and close of its own before the tool opened the
	// FIFO, it was thrown away, and the tool waited for good.
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	release = func() { _, _ = w.WriteString("go\n") }
	t.Cleanup(release)
	writeFile(t, filepath.Join(fake, "block"), "")
	return fake, release
}

func termuxArgs(config string, extra ...string) []string {
	return append([]string{"--config", config, "--transport", "termux", "--poll", "50ms", "--reconnect-max", "500ms", "--max-per-minute", "0", "--log-format", "json"}, extra...)
}

// TestTermuxSendsAndReceives: a REST send reaches termux-sms-send with the
// number, the slot and the text (on stdin), and its status reaches history;
// an SMS placed in the inbox reaches /automation/inbound-sms and a webhook
// once, and what the inbox held before the first start is not forwarded.
func TestTermuxSendsAndReceives(t *testing.T) {
	t.Parallel()
	agentPath, serverPath := binaries(t)
	s := newServer(t, serverPath)
	hooks := newWebhookSink(t, s)
	fake := fakeTermux(t)
	writeFile(t, filepath.Join(fake, "inbox.json"), inboxJSON([3]string{"41", "+15557654321", "old news from before the agent"}))
	config := filepath.Join(t.TempDir(), "agent.json")
	s.pair(agentPath, config, "termux-phone")
	a := startAgent(t, agentPath, fake, termuxArgs(config, "--sims", "SIM1,SIM2=+15550100002")...)

	text := "Your code is 481516; don't share it, \"please\""
	id := s.send("termux-phone", "+15551234567", text, "SIM2")
	until(t, "the send reaches termux-sms-send", func() bool { return len(sendCalls(t, fake)) > 0 })
	calls := sendCalls(t, fake)
	if len(calls) != 1 || calls[0].args != "-n +15551234567 -s 1" || calls[0].text != text {
		t.Fatalf("termux-sms-send calls: got %+v, want one with -n +15551234567 -s 1 and the text on stdin", calls)
	}
	until(t, "the status reaches the server", func() bool { st, _ := s.queued(id); return st == "sent" })
	hist := string(s.must("GET", "/chat/messages?device_fingerprint=termux-phone&phone=%2B15551234567", nil, http.StatusOK))
	if !strings.Contains(hist, `"status":"sent"`) || !strings.Contains(hist, "481516") {
		t.Fatalf("history: got %s, want the message with status sent", hist)
	}
	// The agent logs the job before it reports it, but the test reads its
	// log through a pipe: the line may come after the status.
	until(t, "a JSON log line for the job", func() bool {
		log := a.stderr.String()
		return strings.Contains(log, `"msg":"job sent"`) && strings.Contains(log, id)
	})

	// A refused permission fails the job with a clear log line.
	denied := s.send("termux-phone", "+15550009999", "no permission", "SIM1")
	until(t, "the refused send is reported failed", func() bool {
		st, e := s.queued(denied)
		return st == "failed" && e == "permission_denied"
	})
	until(t, "the log saying which permission to grant", func() bool { return strings.Contains(a.stderr.String(), "Termux:API > Permissions") })

	// A new message in the inbox reaches the server and the webhook once.
	writeFile(t, filepath.Join(fake, "inbox.json"), inboxJSON(
		[3]string{"41", "+15557654321", "old news from before the agent"},
		[3]string{"42", "+15557654321", "Hi back from the phone"}))
	until(t, "the inbound reaches the server", func() bool {
		return strings.Contains(string(s.must("GET", "/automation/inbound-sms?device_fingerprint=termux-phone", nil, http.StatusOK)), "Hi back from the phone")
	})
	until(t, "the webhook is called", func() bool { return hooks.count("Hi back from the phone") > 0 })
	// Let the agent read the inbox a few more times, then count again.
	logged := func() int {
		b, _ := os.ReadFile(filepath.Join(fake, "list.log"))
		return strings.Count(string(b), "\n")
	}
	seen := logged()
	until(t, "more inbox polls", func() bool { return logged() >= seen+5 })
	var inbound []map[string]any
	_ = json.Unmarshal(s.must("GET", "/automation/inbound-sms?device_fingerprint=termux-phone", nil, http.StatusOK), &inbound)
	if len(inbound) != 1 || inbound[0]["message"] != "Hi back from the phone" {
		t.Fatalf("inbound list: got %v, want only the new message (the old one is history)", inbound)
	}
	if n := hooks.count("Hi back from the phone"); n != 1 {
		t.Fatalf("webhook deliveries of the message: got %d, want 1", n)
	}
	if hooks.count("old news") != 0 {
		t.Fatal("a message from before the first start was forwarded")
	}
}

// TestTermuxKilledBetweenAckAndSend kills the agent with SIGKILL while one
// job is inside termux-sms-send and the next is acked and waiting: after a
// restart, the waiting job is sent exactly once, the interrupted one is
// never sent again and is reported sent because the sent box shows it.
func TestTermuxKilledBetweenAckAndSend(t *testing.T) {
	t.Parallel()
	agentPath, serverPath := binaries(t)
	s := newServer(t, serverPath)
	fake, release := fakeTermuxHeld(t)
	config := filepath.Join(t.TempDir(), "agent.json")
	s.pair(agentPath, config, "kill-phone")
	a := startAgent(t, agentPath, fake, termuxArgs(config)...) // SIMs from termux-telephony-deviceinfo

	first := s.send("kill-phone", "+15551230001", "first, held inside the tool", "")
	until(t, "the first send is inside termux-sms-send", func() bool { return countText(sendCalls(t, fake), "first, held inside the tool") == 1 })
	second := s.send("kill-phone", "+15551230002", "second, acked and waiting", "")
	until(t, "the second job is acked (sending)", func() bool { st, _ := s.queued(second); return st == "sending" })
	if n := countText(sendCalls(t, fake), "second, acked and waiting"); n != 0 {
		t.Fatalf("the second job ran while the first held the tool (%d calls)", n)
	}
	a.kill()

	startAgent(t, agentPath, fake, termuxArgs(config)...)
	until(t, "the second job is sent after the restart", func() bool { st, _ := s.queued(second); return st == "sent" })
	until(t, "the first job is reported", func() bool { st, _ := s.queued(first); return st == "sent" })
	release() // the old termux-sms-send ends now; it must change nothing
	calls := sendCalls(t, fake)
	if n := countText(calls, "second, acked and waiting"); n != 1 {
		t.Fatalf("the acked job went to termux-sms-send %d times, want exactly 1", n)
	}
	if n := countText(calls, "first, held inside the tool"); n != 1 {
		t.Fatalf("the interrupted job went to termux-sms-send %d times, want exactly 1 (never again)", n)
	}
}

// TestServerRestartMidBurst kills the server with SIGKILL in the middle of a
// burst of sends and starts it again on the same port and data: every send
// it answered reaches termux-sms-send exactly once and is reported sent.
func TestServerRestartMidBurst(t *testing.T) {
	t.Parallel()
	agentPath, serverPath := binaries(t)
	s := newServer(t, serverPath)
	fake := fakeTermux(t)
	config := filepath.Join(t.TempDir(), "agent.json")
	s.pair(agentPath, config, "burst-phone")
	startAgent(t, agentPath, fake, termuxArgs(config, "--sims", "SIM1")...)

	answered := map[string]string{} // text -> queue id
	killed := false
	for i := 0; i < 60; i++ {
		text := fmt.Sprintf("burst message %02d", i)
		code, b, err := s.call("POST", "/chat/send", map[string]any{"device_fingerprint": "burst-phone", "phone": "+15551239999", "message": text})
		if err == nil && code == http.StatusOK {
			var ans struct {
				QueueID string `json:"queueId"`
			}
			_ = json.Unmarshal(b, &ans)
			answered[text] = ans.QueueID
		}
		if i == 25 && !killed {
			s.kill()
			killed = true
			// A few sends meet the dead server; then it comes back.
			for k := 0; k < 3; k++ {
				if _, _, err := s.call("POST", "/chat/send", map[string]any{"device_fingerprint": "burst-phone", "phone": "+15551239999", "message": "lost"}); err == nil {
					t.Fatal("the killed server answered")
				}
			}
			s.restart()
		}
	}
	if len(answered) < 50 {
		t.Fatalf("only %d sends were answered", len(answered))
	}
	for text, id := range answered {
		until(t, "send "+text+" is reported sent", func() bool { st, _ := s.queued(id); return st == "sent" })
	}
	calls := sendCalls(t, fake)
	for text := range answered {
		if n := countText(calls, text); n != 1 {
			t.Errorf("%q went to termux-sms-send %d times, want 1", text, n)
		}
	}
	for _, c := range calls {
		if countText(calls, c.text) != 1 {
			t.Errorf("%q was sent %d times", c.text, countText(calls, c.text))
		}
	}
}

// TestMissingToolIsNamed: without Termux:API or ModemManager installed the
// agent stops at once and says what to install.
func TestMissingToolIsNamed(t *testing.T) {
	t.Parallel()
	agentPath, _ := binaries(t)
	empty := t.TempDir()
	for _, tc := range []struct{ transport, want string }{
		{"termux", "termux-sms-send is not installed (not found in PATH): install the Termux:API app"},
		{"modem", "mmcli is not installed (not found in PATH): install ModemManager"},
	} {
		cmd := exec.Command(agentPath, "run", "--transport", tc.transport, "--config", filepath.Join(empty, "none.json"))
		cmd.Env = append(os.Environ(), "PATH="+filepath.Join(empty, "bin"))
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s without its tool: got %v %q, want an error containing %q", tc.transport, err, out, tc.want)
		}
	}
}

// TestTermuxReportsHealth: the agent's hello carries the phone's battery
// and charger (termux-battery-status), its network type and the operator
// (termux-telephony-deviceinfo); the device list shows them. A phone whose
// battery tool fails still links, its battery unknown.
func TestTermuxReportsHealth(t *testing.T) {
	t.Parallel()
	agentPath, serverPath := binaries(t)
	s := newServer(t, serverPath)
	fake := fakeTermux(t)
	config := filepath.Join(t.TempDir(), "agent.json")
	s.pair(agentPath, config, "health-phone")
	a := startAgent(t, agentPath, fake, termuxArgs(config)...)
	want := `"health":{"battery":87,"charging":true,"signal":null,"network":"lte","sims":[{"slot":"SIM1","operator":"T-Mobile"}],"battery_low":false,`
	until(t, "the device list shows the phone's health", func() bool {
		code, b, _ := s.call("GET", "/device/list", nil)
		return code == http.StatusOK && strings.Contains(string(b), want)
	})

	a.kill()
	writeScript(t, fake, "termux-battery-status", "echo broken >&2; exit 1\n")
	writeFile(t, filepath.Join(fake, "battery.json"), "")
	startAgent(t, agentPath, fake, termuxArgs(config)...)
	want = `"health":{"battery":null,"charging":null,"signal":null,"network":"lte","sims":[{"slot":"SIM1","operator":"T-Mobile"}],"battery_low":false,`
	until(t, "the phone links again with its battery unknown", func() bool {
		code, b, _ := s.call("GET", "/device/list", nil)
		return code == http.StatusOK && strings.Contains(string(b), want) && strings.Contains(string(b), `"online":true`)
	})
}

// A hang-up (the terminal, Termux session or ssh session the agent was
// started from closing) stops the agent as SIGTERM does: the send inside
// the tool finishes and is journaled, the link is closed, and the agent
// exits 0; the job is reported on the next start. It ended the agent at
// once, as a kill does, the send's outcome unknown.
func TestHangUpStopsTheAgentInOrder(t *testing.T) {
	t.Parallel()
	if signal.Ignored(syscall.SIGHUP) {
		// Started under nohup (or a wrapper that ignores hang-ups): the
		// agents it starts inherit that, and keep hang-ups out by design
		// (TestServeUnderNohupOutlivesAHangUp, TestHangUpIgnoredUnderNohup).
		t.Skip("hang-ups are ignored by this test run (nohup): the processes it starts keep ignoring them")
	}
	agentPath, _ := binaries(t)
	h := signalWhileSending(t, "sighup-phone", syscall.SIGHUP)
	s, a, fake, id := h.s, h.a, h.fake, h.id
	h.release()
	select {
	case <-a.done:
	case <-time.After(time.Minute):
		t.Fatal("the agent still runs after the send it waited for ended")
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(a.stderr.String(), `"msg":"stopped"`) {
		t.Fatalf("the agent after a hang-up: %s, want exit status 0 after its \"stopped\" line", a.cmd.ProcessState)
	}
	startAgent(t, agentPath, fake, termuxArgs(h.config)...)
	until(t, "the send finished at the hang-up is reported on the next start", func() bool { st, _ := s.queued(id); return st == "sent" })
	if n := countText(sendCalls(t, fake), "held inside the tool"); n != 1 {
		t.Errorf("the job went %d times, want once", n)
	}
}

// An agent started with hang-ups ignored (nohup) keeps ignoring them: it
// runs on once the session it was started from is gone.
func TestHangUpIgnoredUnderNohup(t *testing.T) {
	t.Parallel()
	agentPath, serverPath := binaries(t)
	nohup, err := exec.LookPath("nohup")
	if err != nil {
		t.Skip("no nohup on this machine")
	}
	s := newServer(t, serverPath)
	fake := fakeTermux(t)
	config := filepath.Join(t.TempDir(), "agent.json")
	s.pair(agentPath, config, "nohup-phone")
	a := startAgentCmd(t, fake, exec.Command(nohup, append([]string{agentPath, "run"}, termuxArgs(config)...)...))
	until(t, "the agent links", func() bool {
		_, body, err := s.call("GET", "/device/list", nil)
		return err == nil && strings.Contains(string(body), `"online":true`)
	})
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// A job sent after the hang-up is carried out: the agent heard the
	// signal before it, and ran on.
	id := s.send("nohup-phone", "+15551230001", "after the hang-up", "")
	until(t, "the job sent after the hang-up is sent", func() bool { st, _ := s.queued(id); return st == "sent" })
	select {
	case <-a.done:
		t.Fatalf("the agent under nohup ended: %s", a.cmd.ProcessState)
	default:
	}
	if strings.Contains(a.stderr.String(), `"msg":"stopped"`) {
		t.Error("the agent under nohup stopped at a hang-up")
	}
}

// SIGINT lets a send inside the tool finish; a second SIGINT meanwhile
// ends the agent at once (the job is then settled by the restart rule). A
// second one did nothing, and the agent waited for the tool (up to its
// 2 minutes) whatever its user did.
func TestSecondInterruptEndsTheAgent(t *testing.T) {
	t.Parallel()
	a := signalWhileSending(t, "sigint-phone", os.Interrupt).a
	if err := a.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent still runs after a second interrupt")
	}
}

// heldSend is an agent stopping with a send held inside termux-sms-send.
type heldSend struct {
	s            *server
	a            *agentProc
	fake, config string
	id           string // the held job
	release      func() // lets the held send finish
}

// signalWhileSending starts an agent on a new server, has it take a job whose
// send termux-sms-send holds, sends it sig, and waits for it to leave the
// server; the agent must still run then, waiting for the send to finish.
func signalWhileSending(t *testing.T, fingerprint string, sig os.Signal) heldSend {
	t.Helper()
	agentPath, serverPath := binaries(t)
	h := heldSend{s: newServer(t, serverPath), config: filepath.Join(t.TempDir(), "agent.json")}
	h.fake, h.release = fakeTermuxHeld(t)
	h.s.pair(agentPath, h.config, fingerprint)
	h.a = startAgent(t, agentPath, h.fake, termuxArgs(h.config)...)
	h.id = h.s.send(fingerprint, "+15551230001", "held inside the tool", "")
	until(t, "the send is inside termux-sms-send", func() bool { return countText(sendCalls(t, h.fake), "held inside the tool") == 1 })
	if err := h.a.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	until(t, "the agent left the server, waiting for the send", func() bool {
		_, body, err := h.s.call("GET", "/device/list", nil)
		return err == nil && strings.Contains(string(body), `"online":false`)
	})
	select {
	case <-h.a.done:
		t.Fatalf("the agent ended at %v while a send was inside the tool: %s", sig, h.a.cmd.ProcessState)
	default:
	}
	return h
}
