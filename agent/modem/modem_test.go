package modem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/agent"
	"github.com/simrelay/simrelay/agent/agenttest"
	proto "github.com/simrelay/simrelay/android-protocol"
)

// These tests run the transport against a fake mmcli: a shell script the
// test writes into a directory put first in PATH (so they cannot run in
// parallel). It logs its arguments to $FAKE_DIR/log, one call a line.

const smsPath = "/org/freedesktop/ModemManager1/SMS/"

func fakeMMCLI(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> \"$FAKE_DIR/log\"\n" + body
	if err := os.WriteFile(filepath.Join(dir, "mmcli"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_DIR", dir)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return dir
}

func calls(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "log"))
	return string(b)
}

// smsJSON is an SMS object as mmcli -s PATH -J prints it: on one line.
func smsJSON(n int, pduType, state, delivery, text string) string {
	return fmt.Sprintf(`{"sms":{"content":{"data":"--","number":"+15557654321","text":%q},"dbus-path":"%s%d","properties":{"class":"--","delivery-report":"--","delivery-state":%q,"discharge-timestamp":"--","message-reference":"12","pdu-type":%q,"service-category":"--","smsc":"+491710760000","state":%q,"storage":"me","teleservice-id":"--","timestamp":"2026-11-22T10:05:00+01:00","validity":"--"}}}`,
		text, smsPath, n, delivery, pduType, state)
}

// A text is data: a sent SMS that says "not authorized" gets its delivery
// report, and a received one that says "permission denied" is forwarded,
// rather than mmcli's JSON of them being taken for a refused permission
// (which left the job sent for good, the message on the modem for good).
func TestTextsAboutPermissionsAreData(t *testing.T) {
	dir := fakeMMCLI(t, `case "$*" in
"-s `+smsPath+`20 -J") cat <<'EOF'
`+smsJSON(20, "submit", "sent", "completed-received", "Your payment was not authorized. Missing permission? Call us.")+`
EOF
;;
"-m any --messaging-list-sms -J") echo '{"modem.messaging.sms":["`+smsPath+`5"]}';;
"-s `+smsPath+`5 -J") cat <<'EOF'
`+smsJSON(5, "deliver", "received", "--", "Permission denied: not authorized")+`
EOF
;;
"-m any --messaging-delete-sms="*) echo "successfully deleted SMS from modem";;
*) echo "error: unexpected arguments: $*" >&2; exit 1;;
esac
`)
	tr := New(Config{})
	d, err := tr.Delivery(context.Background(), smsPath+"20")
	if err != nil || !d.Final || d.Status != proto.StatusDelivered {
		t.Fatalf("delivery: got %+v, %v; want delivered", d, err)
	}
	if !strings.Contains(calls(dir), "--messaging-delete-sms="+smsPath+"20\n") {
		t.Fatalf("the delivered SMS was not deleted from the modem; calls:\n%s", calls(dir))
	}
	sink := &agenttest.Sink{}
	if err := tr.poll(context.Background(), sink); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if len(sink.Took) != 1 || sink.Took[0].Text != "Permission denied: not authorized" {
		t.Fatalf("took %+v; want the received message", sink.Took)
	}
}

// mmcli reads the number inside its key=value list: one that is not E.164
// (as the server sends it) is refused before mmcli is run.
func TestSendRefusesANumberThatIsNotE164(t *testing.T) {
	dir := fakeMMCLI(t, `echo "Successfully created new SMS: `+smsPath+`20"
`)
	for _, to := range []string{"+15551234567,text=x", "+1555 123 4567", "-h", "15551234567", "+1555123456a"} {
		out, err := New(Config{}).Execute(context.Background(), agent.Job{Send: proto.Send{ID: "j", To: to, Message: "hi"}, Remember: func(string) error { return nil }})
		if err != nil || out.Status != proto.StatusFailed || out.Error != "invalid_job" {
			t.Errorf("to %q: got %+v, %v; want failed invalid_job", to, out, err)
		}
	}
	if c := calls(dir); c != "" {
		t.Fatalf("mmcli was run:\n%s", c)
	}
}

// On a modem in text mode ModemManager ends the text with Ctrl-Z and the
// modem reads what follows as commands: a text holding Ctrl-Z (or ESC,
// which cancels) is refused before mmcli is run.
func TestSendRefusesCtrlZAndESC(t *testing.T) {
	dir := fakeMMCLI(t, `echo "Successfully created new SMS: `+smsPath+`20"
`)
	for _, text := range []string{"hi\x1aAT+CMGD=1,4\r", "hi\x1b", "\x1a"} {
		out, err := New(Config{}).Execute(context.Background(), agent.Job{Send: proto.Send{ID: "j", To: "+15551234567", Message: text}, Remember: func(string) error { return nil }})
		if err != nil || out.Status != proto.StatusFailed || out.Error != "text_not_supported" {
			t.Errorf("text %q: got %+v, %v; want failed text_not_supported", text, out, err)
		}
	}
	if c := calls(dir); c != "" {
		t.Fatalf("mmcli was run:\n%s", c)
	}
}

// A sent SMS that ModemManager no longer has (it renumbers its objects
// when it restarts) has no report to read: it is asked about once, not at
// every poll with a warning for 72 hours.
func TestDeliveryOfAnSMSModemManagerLost(t *testing.T) {
	dir := fakeMMCLI(t, `echo "error: couldn't find SMS at '$2': not found in any modem" >&2
exit 1
`)
	tr := New(Config{})
	for i := 0; i < 3; i++ {
		d, err := tr.Delivery(context.Background(), smsPath+"20")
		if err != nil || d.Final {
			t.Fatalf("poll %d: got %+v, %v; want no report and no error", i, d, err)
		}
	}
	if n := strings.Count(calls(dir), "\n"); n != 1 {
		t.Fatalf("mmcli was asked %d times:\n%s", n, calls(dir))
	}
}

// The same text from the same number in the same second (a double tap) is
// two SMS on the modem, and both are forwarded: they had one key, and the
// second was taken for the first and dropped.
func TestTwoIdenticalSMSAreBothForwarded(t *testing.T) {
	fakeMMCLI(t, `case "$*" in
"-m any --messaging-list-sms -J") echo '{"modem.messaging.sms":["`+smsPath+`5","`+smsPath+`6","`+smsPath+`7"]}';;
"-s `+smsPath+`5 -J") cat <<'EOF'
`+smsJSON(5, "deliver", "received", "--", "On my way")+`
EOF
;;
"-s `+smsPath+`6 -J") cat <<'EOF'
`+smsJSON(6, "deliver", "received", "--", "On my way")+`
EOF
;;
"-s `+smsPath+`7 -J") cat <<'EOF'
`+smsJSON(7, "deliver", "received", "--", "Running late")+`
EOF
;;
*) echo "error: unexpected arguments: $*" >&2; exit 1;;
esac
`)
	sink := &agenttest.Sink{}
	if err := New(Config{}).poll(context.Background(), sink); err != nil {
		t.Fatalf("poll: %v", err)
	}
	keys := map[string]bool{}
	for _, m := range sink.Took {
		keys[m.Key] = true
	}
	if len(sink.Took) != 3 || len(keys) != 3 {
		t.Fatalf("took %+v; want three messages with three keys", sink.Took)
	}
}

// mmcli prints "--" for a text it takes for absent: none, "", "--",
// "unknown" and "none" alike. The text is then read from ModemManager with
// busctl, so a received "--" or "none" is forwarded as it was written; the
// key stays the one mmcli's output gives. Without an answer from busctl
// the text is forwarded empty.
func TestTextMMCLIShowsAsAbsentIsReadOverDBus(t *testing.T) {
	list := `"-m any --messaging-list-sms -J") echo '{"modem.messaging.sms":["` + smsPath + `5","` + smsPath + `6","` + smsPath + `7","` + smsPath + `8"]}';;
`
	for n := 5; n <= 8; n++ {
		list += fmt.Sprintf("\"-s %s%d -J\") cat <<'EOF'\n%s\nEOF\n;;\n", smsPath, n, smsJSON(n, "deliver", "received", "--", "--"))
	}
	dir := fakeMMCLI(t, "case \"$*\" in\n"+list+`*) echo "error: unexpected arguments: $*" >&2; exit 1;;
esac
`)
	get := "--system --json=short get-property org.freedesktop.ModemManager1 " + smsPath
	script := `#!/bin/sh
case "$*" in
"` + get + `5 org.freedesktop.ModemManager1.Sms Text") echo '{"type":"s","data":"--"}';;
"` + get + `6 org.freedesktop.ModemManager1.Sms Text") echo '{"type":"s","data":"none"}';;
"` + get + `7 org.freedesktop.ModemManager1.Sms Text") echo '{"type":"s","data":""}';;
*) echo "Failed to get property Text on interface org.freedesktop.ModemManager1.Sms: Unknown object" >&2; exit 1;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "busctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sink := &agenttest.Sink{}
	if err := New(Config{}).poll(context.Background(), sink); err != nil {
		t.Fatalf("poll: %v", err)
	}
	var texts []string
	for _, m := range sink.Took {
		texts = append(texts, m.Text)
	}
	if got := strings.Join(texts, "|"); got != "--|none||" {
		t.Fatalf("texts: got %q, want --, none, an empty one and one busctl could not read (empty)", got)
	}
	// The key of a text mmcli prints as -- is the one it always had.
	sum := sha256.Sum256([]byte("+15557654321\x002026-11-22T10:05:00+01:00\x00"))
	if want := "modem-" + hex.EncodeToString(sum[:16]); sink.Took[0].Key != want {
		t.Fatalf("key: got %s, want %s", sink.Took[0].Key, want)
	}
}

// statefulMMCLI is an mmcli whose received SMS are the files dir/sms/N.json.
func statefulMMCLI(t *testing.T) string {
	t.Helper()
	dir := fakeMMCLI(t, `P=`+smsPath+`
case "$*" in
"-m any --messaging-list-sms -J")
  printf '{"modem.messaging.sms":['; sep=''
  for f in "$FAKE_DIR"/sms/*.json; do
    [ -e "$f" ] || continue
    printf '%s"%s%s"' "$sep" "$P" "$(basename "$f" .json)"; sep=','
  done
  printf ']}\n';;
"-s $P"*" -J")
  n=${2##*/}
  if [ ! -e "$FAKE_DIR/sms/$n.json" ]; then echo "error: couldn't find SMS at '$2'" >&2; exit 1; fi
  cat "$FAKE_DIR/sms/$n.json";;
"-m any --messaging-delete-sms=$P"*)
  n=${3##*/}
  if [ ! -e "$FAKE_DIR/sms/$n.json" ]; then echo "error: couldn't find SMS at '$P$n'" >&2; exit 1; fi
  rm -f "$FAKE_DIR/sms/$n.json"
  echo "successfully deleted SMS from modem";;
*) echo "error: unexpected arguments: $*" >&2; exit 1;;
esac
`)
	if err := os.Mkdir(filepath.Join(dir, "sms"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func putSMS(t *testing.T, dir string, n int, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "sms", fmt.Sprint(n, ".json")), []byte(smsJSON(n, "deliver", "received", "--", text)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The same text from the same sender with the same timestamp, arriving
// after the first was forwarded and deleted, is a new message: it gets
// the next key rather than the first one's (and was dropped as its
// duplicate). A message still on the modem keeps its key when the agent
// restarts, and when ModemManager restarts and renumbers its SMS; its
// acknowledgement then deletes it at its new path, never the other SMS
// that took its old one.
func TestSameContentAfterTheFirstWasDeletedIsANewMessage(t *testing.T) {
	dir := statefulMMCLI(t)
	ctx := context.Background()
	sink := &agenttest.Sink{Dedup: true}
	tr := New(Config{})
	putSMS(t, dir, 5, "On my way")
	if err := tr.poll(ctx, sink); err != nil || len(sink.Took) != 1 {
		t.Fatalf("first poll: took %+v, %v", sink.Took, err)
	}
	first := sink.Took[0]
	if err := tr.Acknowledge(ctx, first); err != nil {
		t.Fatalf("acknowledge: %v", err)
	}
	sink.Clear(first.Key)
	if _, err := os.Stat(filepath.Join(dir, "sms", "5.json")); !os.IsNotExist(err) {
		t.Fatalf("the acknowledged SMS is still on the modem (%v)", err)
	}

	putSMS(t, dir, 6, "On my way")
	if err := tr.poll(ctx, sink); err != nil || len(sink.Took) != 2 {
		t.Fatalf("the second SMS of the same content: took %+v, %v; want it forwarded", sink.Took, err)
	}
	second := sink.Took[1]
	if second.Key == first.Key || second.Text != "On my way" {
		t.Fatalf("second message: %+v; want a key other than %s", second, first.Key)
	}

	// The agent restarts: the same SMS, the same key (and the journal knows it).
	tr = New(Config{})
	if err := tr.poll(ctx, sink); err != nil || len(sink.Took) != 2 {
		t.Fatalf("after a restart: took %+v, %v; want nothing new", sink.Took, err)
	}

	// ModemManager restarts: the held SMS is now SMS/0, and SMS/6 is another.
	if err := os.Rename(filepath.Join(dir, "sms", "6.json"), filepath.Join(dir, "sms", "0.json")); err != nil {
		t.Fatal(err)
	}
	putSMS(t, dir, 6, "Running late")
	if err := tr.poll(ctx, sink); err != nil || len(sink.Took) != 3 || sink.Took[2].Text != "Running late" {
		t.Fatalf("after ModemManager restarted: took %+v, %v; want only the new text", sink.Took, err)
	}
	if err := tr.Acknowledge(ctx, second); err != nil {
		t.Fatalf("acknowledge after the renumbering: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sms", "0.json")); !os.IsNotExist(err) {
		t.Fatalf("the acknowledged SMS at its new path is still on the modem (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sms", "6.json")); err != nil {
		t.Fatalf("the SMS that took the acknowledged one's old path was deleted: %v", err)
	}
}

// The outcome of an mmcli --send that failed is read off the SMS object:
// ModemManager marks it sent only once the modem took it. mmcli (told to
// wait 100 s, not D-Bus's 25) can give up ("Timeout was reached") while
// ModemManager goes on sending a long or slow SMS: that SMS is watched, and reported sent
// once it is (it was deleted and reported failed, and went out all the
// same), or failed outcome_unknown when it is not sent in time. Another
// error is ModemManager's own: the SMS, still stored, is deleted and the
// job failed at once.
func TestSendErrorIsCheckedAgainstTheModem(t *testing.T) {
	was, wasPoll := sendSettle, sendSettlePoll
	t.Cleanup(func() { sendSettle, sendSettlePoll = was, wasPoll })
	sendSettlePoll = 10 * time.Millisecond
	for _, c := range []struct {
		name, sendErr string
		storedReads   int // reads of the object that find it stored before it is sent (-1: never sent)
		want          string
	}{
		{"timed out, sent later", "Timeout was reached", 3, proto.StatusSent},
		{"timed out, sent already", "Timeout was reached", 0, proto.StatusSent},
		{"timed out, never sent", "Timeout was reached", -1, "outcome_unknown"},
		{"refused by the network", "GDBus.Error:org.freedesktop.ModemManager1.Error.MessageError.NetworkFailure: Network failure", -1, "error"},
	} {
		// An SMS that is sent ends the watch at once: its deadline is
		// generous, as each read is a process started (four of them for
		// "sent later", slow on a loaded machine). One never sent waits the
		// deadline out: short.
		sendSettle = 30 * time.Second
		if c.storedReads < 0 {
			sendSettle = 2 * time.Second
		}
		dir := fakeMMCLI(t, `case "$*" in
"-m any --messaging-create-sms="*) echo "Successfully created new SMS: `+smsPath+`21";;
"-s `+smsPath+`21 --send --timeout=100") echo "error: couldn't send the SMS: '`+c.sendErr+`'" >&2; exit 1;;
"-s `+smsPath+`21 -J")
  n=$(cat "$FAKE_DIR/reads" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE_DIR/reads"
  state=stored
  if [ `+fmt.Sprint(c.storedReads)+` -ge 0 ] && [ "$n" -ge `+fmt.Sprint(c.storedReads)+` ]; then state=sent; fi
  printf '{"sms":{"content":{"number":"+15551234567","text":"hi"},"dbus-path":"`+smsPath+`21","properties":{"pdu-type":"submit","state":"%s","delivery-state":"--"}}}\n' "$state";;
"-m any --messaging-delete-sms="*) echo "successfully deleted SMS from modem";;
*) echo "error: unexpected arguments: $*" >&2; exit 1;;
esac
`)
		out, err := New(Config{}).Execute(context.Background(), agent.Job{Send: proto.Send{ID: "j", To: "+15551234567", Message: "hi"}, Remember: func(string) error { return nil }})
		deleted := strings.Contains(calls(dir), "--messaging-delete-sms=")
		switch c.want {
		case proto.StatusSent:
			if err != nil || out.Status != proto.StatusSent || out.Ref != smsPath+"21" || !out.AwaitDelivery || deleted {
				t.Errorf("%s: got %+v, %v, deleted %v; want sent, awaiting its report, kept", c.name, out, err, deleted)
			}
		case "outcome_unknown":
			if err != nil || out.Status != proto.StatusFailed || out.Error != "outcome_unknown" || !deleted {
				t.Errorf("%s: got %+v, %v, deleted %v; want failed outcome_unknown, deleted", c.name, out, err, deleted)
			}
		default:
			if err == nil || !deleted || strings.Count(calls(dir), " -J\n") != 1 {
				t.Errorf("%s: got %+v, %v, deleted %v; want the error at once and the SMS deleted; calls:\n%s", c.name, out, err, deleted, calls(dir))
			}
		}
	}
}

// ModemManager numbers its SMS objects from the start again when it
// restarts: a path found gone may be given to a new SMS, whose delivery
// report is then read, not taken for the lost one's. Paths found gone are
// forgotten once no job waits for their report (agent.DefaultDeliveryWait).
func TestAGonePathGivenAgainIsAskedAbout(t *testing.T) {
	fakeMMCLI(t, `echo "error: couldn't find SMS at '$2': not found in any modem" >&2
exit 1
`)
	tr := New(Config{})
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tr.now = func() time.Time { return now }
	if d, err := tr.Delivery(context.Background(), smsPath+"20"); err != nil || d.Final {
		t.Fatalf("the lost SMS: got %+v, %v; want no report", d, err)
	}
	fakeMMCLI(t, `case "$*" in
"-m any --messaging-create-sms="*) echo "Successfully created new SMS: `+smsPath+`20";;
"-s `+smsPath+`20 --send --timeout=100") echo "successfully sent the SMS";;
"-s `+smsPath+`20 -J") cat <<'EOF'
`+smsJSON(20, "submit", "sent", "completed-received", "hi")+`
EOF
;;
"-m any --messaging-delete-sms="*) echo "successfully deleted SMS from modem";;
*) echo "error: unexpected arguments: $*" >&2; exit 1;;
esac
`)
	out, err := tr.Execute(context.Background(), agent.Job{Send: proto.Send{ID: "j", To: "+15551234567", Message: "hi"}, Remember: func(string) error { return nil }})
	if err != nil || out.Ref != smsPath+"20" {
		t.Fatalf("send: got %+v, %v; want sent as %s20", out, err, smsPath)
	}
	if d, err := tr.Delivery(context.Background(), smsPath+"20"); err != nil || !d.Final || d.Status != proto.StatusDelivered {
		t.Fatalf("the new SMS under the same path: got %+v, %v; want delivered", d, err)
	}

	fakeMMCLI(t, `echo "error: couldn't find SMS at '$2': not found in any modem" >&2
exit 1
`)
	for i := range 100 {
		if _, err := tr.Delivery(context.Background(), fmt.Sprintf("%s%d", smsPath, 100+i)); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(agent.DefaultDeliveryWait + time.Minute)
	if _, err := tr.Delivery(context.Background(), smsPath+"999"); err != nil {
		t.Fatal(err)
	}
	if n := len(tr.gone); n != 1 {
		t.Fatalf("%d paths kept as gone after their wait, want the newest alone", n)
	}
}

// The modem keeps every cleared key for ever (it is no agent.ClearedKeys):
// its keys are made of the SMS's content, and a key forgotten would go to
// the next SMS of that content, whose client_id would then be the one the
// server already stored, and a repeat is answered without being stored.
func TestClearedKeysAreKeptForEver(t *testing.T) {
	if _, ok := any(New(Config{})).(agent.ClearedKeys); ok {
		t.Fatal("the modem transport lets the journal forget cleared keys")
	}
	dir := statefulMMCLI(t)
	ctx := context.Background()
	tr := New(Config{})
	putSMS(t, dir, 5, "On my way")
	sink := &agenttest.Sink{Dedup: true}
	if err := tr.poll(ctx, sink); err != nil || len(sink.Took) != 1 {
		t.Fatalf("first poll: took %+v, %v", sink.Took, err)
	}
	first := sink.Took[0]
	if err := tr.Acknowledge(ctx, first); err != nil {
		t.Fatalf("acknowledge: %v", err)
	}
	putSMS(t, dir, 6, "On my way")
	forgot := &agenttest.Sink{Dedup: true} // a journal that no longer knows first.Key
	if err := tr.poll(ctx, forgot); err != nil || len(forgot.Took) != 1 {
		t.Fatalf("second poll: took %+v, %v", forgot.Took, err)
	}
	if forgot.Took[0].Key != first.Key {
		t.Fatalf("with the first key forgotten the new SMS got %s, want %s (the reason it is kept)", forgot.Took[0].Key, first.Key)
	}
}
