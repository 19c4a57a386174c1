package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const smsPath = "/org/freedesktop/ModemManager1/SMS/"

// fakeMMCLI writes an mmcli that keeps the modem's SMS objects as files
// dir/sms/N.json, printed as mmcli -J prints them (ModemManager's
// mmcli-output.c: keys nested at the dots, "--" for an absent value), and
// logs every call, one line of arguments each, to dir/mmcli.log.
func fakeMMCLI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sms"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "next"), "20\n")
	writeFile(t, filepath.Join(dir, "modem.json.ready"), `{"modem":{"3gpp":{"enabled-locks":["fixed-dialing"],"eps":{"initial-bearer":{"dbus-path":"--","settings":{"apn":"--","ip-type":"--","password":"--","user":"--"}},"ue-mode-operation":"csps-2"},"imei":"867698040000000","operator-code":"26201","operator-name":"Telekom.de","packet-service-state":"attached","pco":"--","registration-state":"home"},"dbus-path":"/org/freedesktop/ModemManager1/Modem/0","generic":{"access-technologies":["lte"],"bearers":[],"carrier-configuration":"default","device":"/sys/devices/platform/soc/usb1/1-1","drivers":["qmi_wwan","option"],"equipment-identifier":"867698040000000","manufacturer":"Quectel","model":"EC25","own-numbers":["+491701234567"],"plugin":"quectel","ports":["cdc-wdm0 (qmi)","ttyUSB2 (at)"],"power-state":"on","primary-port":"cdc-wdm0","primary-sim-slot":"--","revision":"EC25EFAR06A06M4G","signal-quality":{"recent":"yes","value":"67"},"sim":"/org/freedesktop/ModemManager1/SIM/0","sim-slots":[],"state":"registered","state-failed-reason":"--","supported-bands":[],"supported-capabilities":["gsm-umts, lte"],"supported-ip-families":["ipv4","ipv6","ipv4v6"],"supported-modes":[],"unlock-required":"sim-pin2","unlock-retries":[]}}}`+"\n")
	writeScript(t, dir, "mmcli", `d="$FAKE_DIR"
P=`+smsPath+`
echo "$*" >> "$d/mmcli.log"
case "$*" in
"-m any -J")
  if [ ! -e "$d/modem.json" ]; then echo "error: couldn't find modem" >&2; exit 1; fi
  cat "$d/modem.json";;
"-m any --messaging-list-sms -J")
  printf '{"modem.messaging.sms":['; sep=''
  for f in "$d"/sms/*.json; do
    [ -e "$f" ] || continue
    printf '%s"%s%s"' "$sep" "$P" "$(basename "$f" .json)"; sep=','
  done
  printf ']}\n';;
"-m any --messaging-create-sms="*)
  n=$(cat "$d/next"); echo $((n+1)) > "$d/next"
  printf '{"sms":{"content":{"data":"--","number":"--","text":"--"},"dbus-path":"%s%s","properties":{"class":"--","delivery-report":"requested","delivery-state":"--","discharge-timestamp":"--","message-reference":"--","pdu-type":"submit","service-category":"--","smsc":"--","state":"stored","storage":"--","teleservice-id":"--","timestamp":"--","validity":"--"}}}\n' "$P" "$n" > "$d/sms/$n.tmp"
  mv "$d/sms/$n.tmp" "$d/sms/$n.json"
  echo "Successfully created new SMS: $P$n";;
"-s $P"*" --send --timeout=100")
  n=${2##*/}
  sed 's/"state":"stored"/"state":"sent"/; s/"message-reference":"--"/"message-reference":"12"/' "$d/sms/$n.json" > "$d/sms/$n.tmp"
  mv "$d/sms/$n.tmp" "$d/sms/$n.json"
  echo "successfully sent the SMS";;
"-s $P"*" -J")
  n=${2##*/}
  if [ ! -e "$d/sms/$n.json" ]; then echo "error: couldn't find SMS at '$2'" >&2; exit 1; fi
  cat "$d/sms/$n.json";;
"-m any --messaging-delete-sms=$P"*)
  n=${3##*/}
  if [ ! -e "$d/sms/$n.json" ]; then echo "error: couldn't find SMS at '$P$n'" >&2; exit 1; fi
  rm -f "$d/sms/$n.json"
  echo "successfully deleted SMS from modem";;
*)
  echo "error: unexpected arguments: $*" >&2; exit 1;;
esac
`)
	return dir
}

// receivedSMS is a received SMS object as mmcli -s PATH -J prints it.
func receivedSMS(n int, number, text, state string) string {
	b, _ := json.Marshal(text)
	return fmt.Sprintf(`{"sms":{"content":{"data":"--","number":%q,"text":%s},"dbus-path":"%s%d","properties":{"class":"--","delivery-report":"--","delivery-state":"--","discharge-timestamp":"--","message-reference":"--","pdu-type":"deliver","service-category":"--","smsc":"+491710760000","state":%q,"storage":"me","teleservice-id":"--","timestamp":"2026-11-22T10:05:00+01:00","validity":"--"}}}`+"\n",
		number, b, smsPath, n, state)
}

func mmcliLog(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "mmcli.log"))
	return string(b)
}

// TestModemSendsReportsAndReceives: the agent waits for a modem that is
// still starting; a send is created with a delivery
// report requested and sent; the modem's report turns the message
// delivered; a multipart SMS is forwarded once, whole, after its last part
// came, and deleted from the modem only after the server stored it.
func TestModemSendsReportsAndReceives(t *testing.T) {
	t.Parallel()
	agentPath, serverPath := binaries(t)
	s := newServer(t, serverPath)
	hooks := newWebhookSink(t, s)
	fake := fakeMMCLI(t)
	config := filepath.Join(t.TempDir(), "agent.json")
	s.pair(agentPath, config, "pi-modem")
	a := startAgent(t, agentPath, fake, "--config", config, "--transport", "modem", "--poll", "50ms", "--reconnect-max", "200ms", "--max-per-minute", "0")

	// The modem is still starting: the agent waits for it instead of exiting.
	until(t, "the agent asks for the modem again", func() bool { return strings.Count(mmcliLog(fake), "-m any -J\n") >= 3 })
	select {
	case <-a.done:
		t.Fatalf("the agent exited while the modem was starting:\n%s", a.stderr.String())
	default:
	}
	if err := os.Rename(filepath.Join(fake, "modem.json.ready"), filepath.Join(fake, "modem.json")); err != nil {
		t.Fatal(err)
	}

	// The hello announced the modem's SIM, carrier and own number.
	until(t, "the device shows its SIM", func() bool {
		code, b, _ := s.call("GET", "/device/list", nil)
		return code == 200 && strings.Contains(string(b), `"carrier":"Telekom.de"`) && strings.Contains(string(b), `"phone_number":"+491701234567"`)
	})
	// and the modem's health: its signal quality, access technology and operator; no battery.
	if b := string(s.must("GET", "/device/list", nil, http.StatusOK)); !strings.Contains(b, `"health":{"battery":null,"charging":null,"signal":67,"network":"lte","sims":[{"slot":"SIM1","operator":"Telekom.de"}],"battery_low":false,`) {
		t.Errorf("the device list shows no modem health: %s", b)
	}

	text := "It's 10:00, see you, ok?"
	id := s.send("pi-modem", "+15551234567", text, "SIM1")
	until(t, "the send is reported sent", func() bool { st, _ := s.queued(id); return st == "sent" })
	log := mmcliLog(fake)
	create := "-m any --messaging-create-sms=number='+15551234567',text=\"" + text + "\",delivery-report-request=yes"
	if !strings.Contains(log, create+"\n") || !strings.Contains(log, "-s "+smsPath+"20 --send --timeout=100\n") {
		t.Fatalf("mmcli calls:\n%s\nwant %q and a --send of SMS/20", log, create)
	}
	// The delivery report arrives on the modem.
	sent := filepath.Join(fake, "sms", "20.json")
	b, err := os.ReadFile(sent)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, sent, strings.Replace(string(b), `"delivery-state":"--"`, `"delivery-state":"completed-received"`, 1))
	until(t, "the send is reported delivered", func() bool { st, _ := s.queued(id); return st == "delivered" })
	until(t, "the sent SMS is deleted from the modem", func() bool { _, err := os.Stat(sent); return os.IsNotExist(err) })

	// A failed delivery.
	id2 := s.send("pi-modem", "+15551234568", "never arrives", "SIM1")
	until(t, "the second send is sent", func() bool { st, _ := s.queued(id2); return st == "sent" })
	sent2 := filepath.Join(fake, "sms", "21.json")
	b, _ = os.ReadFile(sent2)
	writeFile(t, sent2, strings.Replace(string(b), `"delivery-state":"--"`, `"delivery-state":"error-unknown-subscriber"`, 1))
	until(t, "the second send is reported failed", func() bool {
		st, e := s.queued(id2)
		return st == "failed" && e == "delivery_failed"
	})

	// A multipart SMS: ModemManager shows it "receiving" until its last part.
	long := strings.Repeat("Part of a long message. ", 12)
	in := filepath.Join(fake, "sms", "5.json")
	writeFile(t, in, receivedSMS(5, "+15557654321", long[:153], "receiving"))
	polls := func() int { return strings.Count(mmcliLog(fake), "--messaging-list-sms") }
	seen := polls()
	until(t, "the agent reads the incomplete message a few times", func() bool { return polls() >= seen+5 })
	if strings.Contains(mmcliLog(fake), "--messaging-delete-sms="+smsPath+"5") {
		t.Fatal("an incomplete message was deleted")
	}
	writeFile(t, in, receivedSMS(5, "+15557654321", long, "received"))
	until(t, "the message is deleted from the modem", func() bool { _, err := os.Stat(in); return os.IsNotExist(err) })
	var inbound []map[string]any
	_ = json.Unmarshal(s.must("GET", "/automation/inbound-sms?device_fingerprint=pi-modem", nil, http.StatusOK), &inbound)
	if len(inbound) != 1 || inbound[0]["message"] != long || inbound[0]["phone"] != "+15557654321" {
		t.Fatalf("inbound: got %v, want the whole multipart text once (stored before the modem's copy was deleted)", inbound)
	}
	until(t, "the webhook is called", func() bool { return hooks.count("Part of a long message") > 0 })
	if n := hooks.count("Part of a long message"); n != 1 {
		t.Fatalf("webhook deliveries: got %d, want 1", n)
	}

	// The same text again from the same sender with the same timestamp, at
	// a new path, after the first was deleted: a new message, not the first
	// one read again.
	again := filepath.Join(fake, "sms", "6.json")
	writeFile(t, again, receivedSMS(6, "+15557654321", long, "received"))
	until(t, "the second message is deleted from the modem", func() bool { _, err := os.Stat(again); return os.IsNotExist(err) })
	_ = json.Unmarshal(s.must("GET", "/automation/inbound-sms?device_fingerprint=pi-modem", nil, http.StatusOK), &inbound)
	if len(inbound) != 2 || inbound[0]["message"] != long || inbound[1]["message"] != long {
		t.Fatalf("inbound: got %v, want the same text twice", inbound)
	}
}
