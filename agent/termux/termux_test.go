package termux

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/agent"
	"github.com/simrelay/simrelay/agent/agenttest"
	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/poll"
)

// These tests run the transport against fake Termux:API tools: shell
// scripts the test writes into a directory put first in PATH (so they
// cannot run in parallel). FAKE_DIR is that directory.

func fakeTools(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("FAKE_DIR", dir)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return dir
}

// inbox is termux-sms-list's answer as Termux:API prints it (JsonWriter
// with an indent of two), one message.
const inbox = `[
  {
    "threadid": 3,
    "type": "inbox",
    "read": false,
    "number": "+15557654321",
    "received": "2026-11-22 10:05:00",
    "body": "Permission denied: your card was not authorized. Grant the following permission to us: call 0800",
    "_id": 7
  }
]
`

// A received text is data: one that says "permission denied" is forwarded,
// not taken for Termux:API refusing the SMS permission (which stopped the
// inbox, as every poll read that message again).
func TestInboxTextAboutPermissionsIsForwarded(t *testing.T) {
	fakeTools(t, map[string]string{"termux-sms-list": "cat <<'EOF'\n" + inbox + "EOF\n"})
	tr := New(Config{})
	sink := &agenttest.Sink{Marks: map[string]string{markKey: "5"}}
	if err := tr.poll(context.Background(), sink); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if len(sink.Took) != 1 || !strings.HasPrefix(sink.Took[0].Text, "Permission denied: your card") || sink.Marks[markKey] != "7" {
		t.Fatalf("took %+v, mark %q; want the message forwarded and the mark at 7", sink.Took, sink.Marks[markKey])
	}
}

// Termux:API's own refusal is still one: its JSON notice (exit status 0)
// fails the send with a permission error, as its plain-text form does.
func TestPermissionNoticeFailsTheSend(t *testing.T) {
	for _, notice := range []string{
		`{\n  "error": "Please grant the following permission to use this command: android.permission.SEND_SMS"\n}`,
		`Please grant the following permissions to use this command: android.permission.SEND_SMS`,
	} {
		fakeTools(t, map[string]string{"termux-sms-send": "cat >/dev/null\nprintf '" + notice + "\\n'\n"})
		_, err := New(Config{}).Execute(context.Background(), agent.Job{Send: proto.Send{ID: "j", To: "+15551234567", Message: "hi"}})
		var te *agent.ToolError
		if !errors.As(err, &te) || te.Kind != "permission" {
			t.Fatalf("notice %q: got %v, want a permission ToolError", notice, err)
		}
	}
}

// termux-sms-send puts -n's value into an unquoted command line and reads
// commas as a list of recipients: a number that is not E.164 never reaches
// it.
func TestSendRefusesANumberThatIsNotE164(t *testing.T) {
	dir := fakeTools(t, map[string]string{"termux-sms-send": "cat >/dev/null\nprintf '%s ' \"$@\" >> \"$FAKE_DIR/calls\"\n"})
	for _, to := range []string{"+15551234567,+15557654321", "+1555 123 4567", "+15551234567 --es x y", "-h", "+1555123456a", "15551234567", "+0155512345"} {
		out, err := New(Config{}).Execute(context.Background(), agent.Job{Send: proto.Send{ID: "j", To: to, Message: "hi"}})
		if err != nil || out.Status != proto.StatusFailed || out.Error != "invalid_job" {
			t.Errorf("to %q: got %+v, %v; want failed invalid_job", to, out, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "calls")); err == nil {
		t.Fatalf("termux-sms-send was run: %s", b)
	}
	out, err := New(Config{}).Execute(context.Background(), agent.Job{Send: proto.Send{ID: "j", To: "+15551234567", Message: "hi", SIMSlot: proto.SIM1}})
	if err != nil || out.Status != proto.StatusSent {
		t.Fatalf("a valid number: got %+v, %v", out, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "calls")); string(b) != "-n +15551234567 " {
		t.Fatalf("termux-sms-send arguments: %q", b)
	}
}

// termux-sms-send drops a message without a word when its -s names a slot
// without a SIM: the SIM termux-telephony-deviceinfo found is Android's
// default, whatever its slot, and is sent from without -s; the slots named
// with --sims are given.
func TestSendGivesTheSlotOnlyForNamedSIMs(t *testing.T) {
	dir := fakeTools(t, map[string]string{"termux-sms-send": "cat >/dev/null\nprintf '%s ' \"$@\" >> \"$FAKE_DIR/calls\"\necho >> \"$FAKE_DIR/calls\"\n"})
	job := agent.Job{Send: proto.Send{ID: "j", To: "+15551234567", Message: "hi", SIMSlot: proto.SIM1}}
	named := New(Config{SIMs: []proto.SIM{{Slot: proto.SIM1}, {Slot: proto.SIM2}}})
	for _, tr := range []*Transport{New(Config{}), named} {
		if out, err := tr.Execute(context.Background(), job); err != nil || out.Status != proto.StatusSent {
			t.Fatalf("got %+v, %v", out, err)
		}
	}
	job.SIMSlot = proto.SIM2
	if out, err := named.Execute(context.Background(), job); err != nil || out.Status != proto.StatusSent {
		t.Fatalf("got %+v, %v", out, err)
	}
	want := "-n +15551234567 \n-n +15551234567 -s 0 \n-n +15551234567 -s 1 \n"
	if b, _ := os.ReadFile(filepath.Join(dir, "calls")); string(b) != want {
		t.Fatalf("termux-sms-send arguments:\n%s\nwant:\n%s", b, want)
	}
}

// gone reports whether the process pid no longer exists (or is a zombie
// no one waits for).
func gone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// killLeft kills the process whose pid a fake wrote to file, should the
// tool's kill have missed it.
func killLeft(t *testing.T, file string) {
	if b, err := os.ReadFile(file); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 && !gone(pid) {
			t.Logf("killing %d, left running", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// A send that hangs is stopped at its deadline with what it started:
// termux-sms-send is a script that runs termux-api, which waits for the
// Termux:API app forever when the app does not answer, holding the
// script's output open. Killing the script alone left the agent waiting
// for that output.
func TestHungSendIsKilledWithItsChildren(t *testing.T) {
	dir := fakeTools(t, map[string]string{"termux-sms-send": `cat >/dev/null
sleep 1000 &
echo $! > "$FAKE_DIR/child"
wait
`})
	t.Cleanup(func() { killLeft(t, filepath.Join(dir, "child")) })
	// The send's deadline passes once the script has started its child (a
	// fixed 300 ms could pass first on a loaded machine, and nothing was
	// left to kill).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := New(Config{}).Execute(ctx, agent.Job{Send: proto.Send{ID: "j", To: "+15551234567", Message: "hi"}})
		done <- err
	}()
	poll.Until(t, "the script starts its child", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "child"))
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a send killed at its deadline reported no error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Execute still waits for termux-sms-send 30 s after its deadline")
	}
	b, err := os.ReadFile(filepath.Join(dir, "child"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	poll.Within(t, 10*time.Second, "the tool's child is killed", func() bool { return gone(pid) })
}

// A query with no deadline of its own is bounded by the tool's timeout: a
// termux-battery-status that never answers delayed every hello (Inventory
// runs before each connection) for as long as it hung.
func TestHungQueryTimesOut(t *testing.T) {
	dir := fakeTools(t, map[string]string{
		"termux-battery-status":       "echo $$ > \"$FAKE_DIR/battery\"\nexec sleep 1000\n",
		"termux-telephony-deviceinfo": `echo '{"sim_state":"ready","network_type":"lte"}'` + "\n",
	})
	old := battery.Timeout
	battery.Timeout = 300 * time.Millisecond
	defer func() { battery.Timeout = old }()
	t.Cleanup(func() { killLeft(t, filepath.Join(dir, "battery")) })
	done := make(chan agent.Inventory, 1)
	go func() {
		inv, _ := New(Config{SIMs: []proto.SIM{{Slot: proto.SIM1}}}).Inventory(context.Background())
		done <- inv
	}()
	select {
	case inv := <-done:
		if inv.Health == nil || inv.Health.Battery != nil || inv.Health.Network != "lte" {
			t.Fatalf("health %+v: want the network and no battery", inv.Health)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Inventory still waits for termux-battery-status after 30 s")
	}
}

// A tool that prints without end is stopped once its output passes the
// cap: the agent never holds more of it.
func TestEndlessOutputIsCut(t *testing.T) {
	// 24 MiB of spaces, then an empty list: valid JSON, too big to hold.
	fakeTools(t, map[string]string{"termux-sms-list": "head -c 25165824 /dev/zero | tr '\\000' ' '\necho '[]'\n"})
	sink := &agenttest.Sink{Marks: map[string]string{markKey: "5"}}
	err := New(Config{}).poll(context.Background(), sink)
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("poll: got %v, want an error saying the output was too big", err)
	}
}

// Termux:API trims the text it sends, and Android's sent box holds it
// trimmed: a job whose text ends with a newline is still found there after
// a crash, and reported sent rather than outcome_unknown.
func TestRecoverFindsATrimmedText(t *testing.T) {
	fakeTools(t, map[string]string{"termux-sms-list": `cat <<EOF
[
  {
    "threadid": 3,
    "type": "sent",
    "read": true,
    "number": "+15551234567",
    "received": "$(date '+%Y-%m-%d %H:%M:%S')",
    "body": "See you at 10:00",
    "_id": 9
  }
]
EOF
`})
	job := agent.Job{Send: proto.Send{ID: "j", To: "+15551234567", Message: "\tSee you at 10:00\n\n"}, DispatchedAt: time.Now()}
	out, known := New(Config{}).Recover(context.Background(), job)
	if !known || out.Status != proto.StatusSent {
		t.Fatalf("got %+v, known %v; want sent", out, known)
	}
	job.Message = "See you at 10:30\n"
	if out, known := New(Config{}).Recover(context.Background(), job); known {
		t.Fatalf("another text: got %+v, want unknown", out)
	}
}

// A tool that exits with status 0 while something it started still holds
// its output (the `am` that termux-api starts, slow to finish) succeeded:
// the agent stops waiting for that output after a while and reports the
// send sent, not failed. The wait is cut short here (the product's is
// 5 s); it ends the same way. The package's tests run one at a time
// (fakeTools sets PATH), so none reads send meanwhile.
func TestSendWhoseHelperLingersIsSent(t *testing.T) {
	dir := fakeTools(t, map[string]string{"termux-sms-send": `cat >/dev/null
sleep 1000 &
echo $! > "$FAKE_DIR/child"
exit 0
`})
	t.Cleanup(func() { killLeft(t, filepath.Join(dir, "child")) })
	defer func(d time.Duration) { send.WaitDelay = d }(send.WaitDelay)
	send.WaitDelay = 200 * time.Millisecond
	out, err := New(Config{}).Execute(context.Background(), agent.Job{Send: proto.Send{ID: "j", To: "+15551234567", Message: "hi"}})
	if err != nil || out.Status != proto.StatusSent {
		t.Fatalf("got %+v, %v; want sent", out, err)
	}
}

// One poll reads at most 20 pages: when the mark is further back than
// that, the messages in between are not forwarded, and the log says so.
func TestTooManyNewMessagesAreLogged(t *testing.T) {
	fakeTools(t, map[string]string{"termux-sms-list": `off=0
while [ $# -gt 0 ]; do
  case "$1" in -o) off=$2; shift;; esac
  shift
done
a=$((1000 - off)); b=$((a - 1))
printf '[{"_id":%d,"number":"+15557654321","received":"2026-11-22 10:05:00","body":"m%d"},{"_id":%d,"number":"+15557654321","received":"2026-11-22 10:05:00","body":"m%d"}]\n' $a $a $b $b
`})
	var log bytes.Buffer
	tr := New(Config{PageSize: 2, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	sink := &agenttest.Sink{Marks: map[string]string{markKey: "5"}}
	if err := tr.poll(context.Background(), sink); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if len(sink.Took) != 2*maxPages || sink.Marks[markKey] != "1000" {
		t.Fatalf("took %d messages, mark %q; want %d and 1000", len(sink.Took), sink.Marks[markKey], 2*maxPages)
	}
	if !strings.Contains(log.String(), "the older ones are not forwarded") || !strings.Contains(log.String(), "not_forwarded_ids_below=961") {
		t.Fatalf("log:\n%s\nwant a warning that messages above 5 and below 961 were not forwarded", log.String())
	}
}

// A phone that writes the sent box's numbers in their national form
// (0151 23456789 for +4915123456789) still has the job found there after a
// crash; another number with the same text does not match.
func TestRecoverFindsANumberInItsNationalForm(t *testing.T) {
	fakeTools(t, map[string]string{"termux-sms-list": `cat <<EOF
[
  {
    "threadid": 3,
    "type": "sent",
    "read": true,
    "number": "0151 23456789",
    "received": "$(date '+%Y-%m-%d %H:%M:%S')",
    "body": "Your code is 4411",
    "_id": 9
  }
]
EOF
`})
	job := agent.Job{Send: proto.Send{ID: "j", To: "+4915123456789", Message: "Your code is 4411"}, DispatchedAt: time.Now()}
	if out, known := New(Config{}).Recover(context.Background(), job); !known || out.Status != proto.StatusSent {
		t.Fatalf("got %+v, known %v; want sent", out, known)
	}
	job.To = "+4915123456780"
	if out, known := New(Config{}).Recover(context.Background(), job); known {
		t.Fatalf("another number: got %+v, want unknown", out)
	}
}

// farZone is a time zone whose offset at t is at least three hours from the
// local zone's: the phone's, in the tests of the dates termux-sms-list
// writes in Android's zone.
func farZone(t *testing.T, at time.Time) *time.Location {
	t.Helper()
	_, local := at.In(time.Local).Zone()
	for _, name := range []string{"America/Los_Angeles", "Asia/Tokyo"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, off := at.In(loc).Zone(); off-local >= 3*3600 || local-off >= 3*3600 {
			return loc
		}
	}
	t.Fatal("no zone far from the local one")
	return nil
}

// Termux:API writes a message's date in Android's time zone, which the
// agent asks getprop for: Go finds no local zone on Android and took the
// date for UTC, hours off on a phone in another zone.
func TestInboxDateIsReadInAndroidsZone(t *testing.T) {
	sent := time.Date(2026, 11, 22, 15, 5, 0, 0, time.UTC)
	phone := farZone(t, sent)
	fakeTools(t, map[string]string{
		"getprop": `[ "$1" = persist.sys.timezone ] && echo ` + phone.String() + "\n",
		"termux-sms-list": `echo '[{"_id":7,"type":"inbox","number":"+15557654321","received":"` +
			sent.In(phone).Format(time.DateTime) + `","body":"hi"}]'` + "\n",
	})
	sink := &agenttest.Sink{Marks: map[string]string{markKey: "5"}}
	if err := New(Config{}).poll(context.Background(), sink); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if len(sink.Took) != 1 || !sink.Took[0].At.Equal(sent) {
		t.Fatalf("took %+v; want one message received at %s", sink.Took, sent)
	}
}

// After a crash the sent box's date of the job, written in Android's zone,
// is read in that zone: a phone west of the agent's zone had its send taken
// for an older one and reported failed outcome_unknown.
func TestRecoverReadsTheSentBoxInAndroidsZone(t *testing.T) {
	now := time.Now()
	phone := farZone(t, now)
	fakeTools(t, map[string]string{
		"getprop": `[ "$1" = persist.sys.timezone ] && echo ` + phone.String() + "\n",
		"termux-sms-list": `echo '[{"_id":9,"type":"sent","number":"+15551234567","received":"` +
			now.In(phone).Format(time.DateTime) + `","body":"Your code is 4411"}]'` + "\n",
	})
	job := agent.Job{Send: proto.Send{ID: "j", To: "+15551234567", Message: "Your code is 4411"}, DispatchedAt: now}
	if out, known := New(Config{}).Recover(context.Background(), job); !known || out.Status != proto.StatusSent {
		t.Fatalf("got %+v, known %v; want sent", out, known)
	}
	// A message of the same text sent hours before the job is still older.
	job.DispatchedAt = now.Add(4 * time.Hour)
	if out, known := New(Config{}).Recover(context.Background(), job); known {
		t.Fatalf("an older message: got %+v, want unknown", out)
	}
}

// termux-sms-list lists the inbox newest date first, and the mark is the
// highest _id forwarded. A new message dated before older ones (the
// phone's clock was set back, or the messaging app wrote a late date) sits
// below a page that holds old ones: the walk goes on until a page holds
// nothing new, so it is forwarded, not skipped under the moved mark.
func TestLateDatedMessageIsForwarded(t *testing.T) {
	fakeTools(t, map[string]string{"termux-sms-list": inboxPages + `case $off in
0) printf '['; row 12 "2026-11-22 10:10:00"; printf ,; row 10 "2026-11-22 10:09:00"; printf ']\n';;
2) printf '['; row 9 "2026-11-22 10:08:00"; printf ,; row 11 "2026-11-22 10:07:30"; printf ']\n';;
4) printf '['; row 8 "2026-11-22 10:07:00"; printf ,; row 7 "2026-11-22 10:06:00"; printf ']\n';;
*) printf '[]\n';;
esac
`})
	tr := New(Config{PageSize: 2, Logger: slog.New(slog.DiscardHandler)})
	sink := &agenttest.Sink{Marks: map[string]string{markKey: "10"}}
	if err := tr.poll(context.Background(), sink); err != nil {
		t.Fatalf("poll: %v", err)
	}
	var got []string
	for _, m := range sink.Took {
		got = append(got, m.Text)
	}
	if strings.Join(got, ",") != "m11,m12" || sink.Marks[markKey] != "12" {
		t.Fatalf("took %v, mark %q; want m11,m12 (oldest first) and 12", got, sink.Marks[markKey])
	}
}

// The journal forgets a cleared message's key after ClearedKeyRetention
// (agent.ClearedKeys): that is safe because the inbox is read above the
// mark only, and the mark, stored with the messages, is at least the _id
// of every one taken. A journal that knows none of the keys any more (a
// sink without them) reads none of those messages again.
func TestForgottenKeysAreNotReadAgain(t *testing.T) {
	fakeTools(t, map[string]string{"termux-sms-list": inboxPages + `case $off in
0) printf '['; row 12 "2026-11-22 10:10:00"; printf ,; row 10 "2026-11-22 10:09:00"; printf ,; row 11 "2026-11-22 10:07:30"; printf ']\n';;
*) printf '[]\n';;
esac
`})
	var _ agent.ClearedKeys = (*Transport)(nil)
	tr := New(Config{PageSize: 5, Logger: slog.New(slog.DiscardHandler)})
	sink := &agenttest.Sink{Marks: map[string]string{markKey: "9"}}
	if err := tr.poll(context.Background(), sink); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if len(sink.Took) != 3 || sink.Marks[markKey] != "12" {
		t.Fatalf("took %d, mark %q; want 3 and 12", len(sink.Took), sink.Marks[markKey])
	}
	forgot := &agenttest.Sink{Marks: map[string]string{markKey: sink.Marks[markKey]}}
	if err := tr.poll(context.Background(), forgot); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if len(forgot.Took) != 0 {
		t.Fatalf("with the keys forgotten, the inbox gave %+v again", forgot.Took)
	}
	if tr.ClearedKeyRetention() <= 0 {
		t.Fatalf("ClearedKeyRetention %v", tr.ClearedKeyRetention())
	}
}

// inboxPages begins a fake termux-sms-list that answers by its -o offset
// ($off), writing each message with row ID DATE (its text "mID").
const inboxPages = `off=0
while [ $# -gt 0 ]; do
  case "$1" in -o) off=$2; shift;; esac
  shift
done
row() { printf '{"_id":%d,"number":"+15557654321","received":"%s","body":"m%d"}' $1 "$2" $1; }
`
