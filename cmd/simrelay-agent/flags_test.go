package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/agent"
)

// A modem's --number the server would refuse in every hello (PROTOCOL.md
// 7.1 rule 4) is refused at start, as --sims numbers are.
func TestModemNumberMustBeE164(t *testing.T) {
	t.Parallel()
	var errOut bytes.Buffer
	code := run(t.Context(), []string{"run", "--transport", "modem", "--number", "0555 123 4567", "--config", t.TempDir() + "/agent.json"}, &bytes.Buffer{}, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "--number") || !strings.Contains(errOut.String(), "E.164") {
		t.Fatalf("exit %d, output %q; want 1 naming --number and E.164", code, errOut.String())
	}
}

// A second agent on one configuration stops at the journal's lock before
// its transport touches anything (a WhatsApp session, a modem) the first
// agent is using.
func TestSecondAgentStopsBeforeItsTransport(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "agent.json")
	if err := agent.SaveConfig(config, agent.ConfigFile{Server: "http://127.0.0.1:1", WSURL: "ws://127.0.0.1:1/device/ws", DeviceToken: "dt_x", Salt: "s1"}); err != nil {
		t.Fatal(err)
	}
	j, err := agent.OpenJournal(agent.JournalPath(config), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var errOut bytes.Buffer
	code := run(t.Context(), []string{"run", "--transport", "whatsapp", "--config", config}, &bytes.Buffer{}, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "in use by another simrelay-agent") {
		t.Fatalf("exit %d, output %q; want 1: the journal is in use", code, errOut.String())
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(config), "whatsapp.session.db")); err == nil {
		t.Fatal("the second agent opened the WhatsApp session")
	}
}
