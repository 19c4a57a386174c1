package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Asking a command for help is not a mistake: its flags are printed as
// simrelay prints its own (--flag and the environment twin) and the exit
// status is 0; an unknown flag is 2.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"pair", "-h"}, {"run", "--help"}, {"whatsapp", "link", "-h"}} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), args, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "  --config  [SIMRELAY_AGENT_CONFIG] (default ") {
			t.Errorf("%v: exit %d, output %q; want 0 with the flags and their twins", args, code, errOut.String())
		}
	}
	// help COMMAND answers as COMMAND -h does (it printed the general usage).
	for _, args := range [][]string{{"help", "pair"}, {"help", "whatsapp", "link"}} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), args, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "  --config  [SIMRELAY_AGENT_CONFIG] (default ") {
			t.Errorf("%v: exit %d, output %q; want 0 with the command's flags", args, code, out.String()+errOut.String())
		}
	}
	var errOut bytes.Buffer
	if code := run(t.Context(), []string{"help", "bogus"}, &bytes.Buffer{}, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "bogus"`) {
		t.Errorf("help bogus: exit %d, stderr %q; want 2 naming the word", code, errOut.String())
	}
	errOut.Reset()
	if code := run(t.Context(), []string{"pair", "--no-such-flag"}, &bytes.Buffer{}, &errOut); code != 2 || !strings.Contains(errOut.String(), "-no-such-flag (-h lists the flags)") {
		t.Errorf("an unknown flag: exit %d, output %q; want 2 naming it", code, errOut.String())
	}
}

// version takes no word or flag, as the other commands take no stray one
// (docs/agents.md): it printed the version whatever followed it
// (simrelay-agent version --bogus, exit 0). -h says what it does.
func TestVersionTakesNoArgument(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"extra", "--bogus"} {
		var out, errOut bytes.Buffer
		code := run(t.Context(), []string{"version", arg}, &out, &errOut)
		if code != 2 || out.Len() != 0 || !strings.Contains(errOut.String(), `simrelay-agent version: unexpected argument "`+arg+`"`) {
			t.Errorf("version %s: exit %d, stdout %q, stderr %q; want 2 naming the argument, no version", arg, code, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"version", "-h"}, &out, &errOut); code != 0 || !strings.Contains(out.String()+errOut.String(), "Usage: simrelay-agent version") {
		t.Errorf("version -h: exit %d, output %q; want 0 and its usage", code, out.String()+errOut.String())
	}
}

// A word that is not a flag is refused by name, wherever it stands, rather
// than ending the flags and leaving the ones after it unread; a bad value
// names the flag in both spellings and says what it wants, once.
func TestFlagMistakesAreNamed(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "agent.json")
	// Should a stray word ever end the flags again, link must fail here
	// before it dials WhatsApp: the session's directory is a file.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"pair", "stray", "--server", "https://sms.example.com", "--code", "K7QX3MZP"}, `simrelay-agent pair: unexpected argument "stray"`},
		{[]string{"run", "--transport", "modem", "termux", "--number", "bad", "--config", config}, `simrelay-agent run: unexpected argument "termux"`},
		{[]string{"whatsapp", "link", "--session", filepath.Join(blocker, "s.db"), "now", "--qr-png", filepath.Join(blocker, "qr.png")}, `simrelay-agent whatsapp link: unexpected argument "now"`},
		{[]string{"run", "--poll", "5", "--config", config}, `simrelay-agent run: --poll (SIMRELAY_AGENT_POLL) "5": wants a duration such as 15s or 2m`},
		{[]string{"run", "--max-per-minute", "lots", "--config", config}, `--max-per-minute (SIMRELAY_AGENT_MAX_PER_MINUTE) "lots": wants a whole number`},
		{[]string{"pair", "--allow-http", "true"}, `--allow-http takes its value after '=': --allow-http=true`},
		{[]string{"pair", "--server"}, `--server needs a value`},
	}
	for _, c := range cases {
		var errOut bytes.Buffer
		code := run(t.Context(), c.args, &bytes.Buffer{}, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), c.want) || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, output %q; want 2 and one line with %q", c.args, code, errOut.String(), c.want)
		}
	}
}

// An environment twin's bad value names the variable and the flag.
// A duration or size that is not positive is refused naming the flag and
// its value: a negative --health-every was taken as 15 minutes where the
// docs say a short one is a minute.
func TestNonPositiveValuesAreNamed(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "agent.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--health-every", "-5m"}, `--health-every -5m0s: must be positive`},
		{[]string{"--poll", "0s"}, `--poll 0s: must be positive`},
		{[]string{"--media-max-bytes", "0"}, `--media-max-bytes 0: must be positive`},
		{[]string{"--max-per-minute", "-1"}, `--max-per-minute -1: must be 0 (no pacing) or more`},
	} {
		var errOut bytes.Buffer
		code := run(t.Context(), append([]string{"run", "--config", config}, c.args...), &bytes.Buffer{}, &errOut)
		if code != 1 || errOut.String() != "simrelay-agent run: "+c.want+"\n" {
			t.Errorf("%q: exit %d, output %q; want 1 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}

func TestBadEnvironmentValueIsNamed(t *testing.T) {
	t.Setenv("SIMRELAY_AGENT_RECONNECT_MAX", "soon")
	var errOut bytes.Buffer
	code := run(t.Context(), []string{"run", "--config", filepath.Join(t.TempDir(), "agent.json")}, &bytes.Buffer{}, &errOut)
	if want := `SIMRELAY_AGENT_RECONNECT_MAX="soon": --reconnect-max wants a duration such as 15s or 2m`; code != 2 || !strings.Contains(errOut.String(), want) {
		t.Fatalf("exit %d, output %q; want 2 and %q", code, errOut.String(), want)
	}
}

// Flags keep their single-dash spelling too, and come in any order.
func TestSingleDashFlags(t *testing.T) {
	t.Parallel()
	var errOut bytes.Buffer
	code := run(t.Context(), []string{"run", "-config", filepath.Join(t.TempDir(), "agent.json"), "-transport", "carrier-pigeon"}, &bytes.Buffer{}, &errOut)
	if want := `--transport "carrier-pigeon": want termux, modem, whatsapp or imessage`; code != 1 || !strings.Contains(errOut.String(), want) {
		t.Fatalf("exit %d, output %q; want 1 and %q", code, errOut.String(), want)
	}
}
