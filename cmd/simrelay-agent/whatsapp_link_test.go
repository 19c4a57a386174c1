package main

import (
	"bytes"
	"errors"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"
)

// TestShowQRPrintsAndWritesTheCode: whatsapp link shows each of WhatsApp's
// QR codes in the terminal (block characters) and writes it as a PNG that
// decodes to the same code. (Linking itself needs WhatsApp's servers and a
// phone: it is not run here.)
func TestShowQRPrintsAndWritesTheCode(t *testing.T) {
	t.Parallel()
	code := "2@Qw3rTy+example/ref,AbCdEf0123456789=,GhIjKl9876543210=,MnOpQr=="
	path := filepath.Join(t.TempDir(), "whatsapp-qr.png")
	var out bytes.Buffer
	if err := showQR(&out, code, path); err != nil {
		t.Fatal(err)
	}
	if !strings.ContainsAny(out.String(), "█▀▄") || strings.Count(out.String(), "\n") < 10 {
		t.Fatalf("terminal QR:\n%s", out.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil || res.GetText() != code {
		t.Fatalf("the PNG decodes to %v (%v), want %q", res, err, code)
	}
}

// TestQRPNGIsPrivate: the QR code carries the session's pairing keys (its
// advertising secret among them), so its PNG is written for the agent's user
// only, as the session file is, also over a file another program left
// readable to all.
func TestQRPNGIsPrivate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "whatsapp-qr.png")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := showQR(io.Discard, "2@ref,noise=,identity=,adv==", path); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("QR PNG: %v %v, want mode 0600", st, err)
		}
	}
}

// TestWhatsAppRunNeedsALinkedSession: run --transport whatsapp on a session
// file that was never linked stops at once with what to do, and does not
// connect anywhere.
func TestWhatsAppRunNeedsALinkedSession(t *testing.T) {
	t.Parallel()
	agentBin, _ := binaries(t)
	dir := t.TempDir()
	out, err := exec.Command(agentBin, "run", "--transport", "whatsapp", "--config", filepath.Join(dir, "agent.json")).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "simrelay-agent whatsapp link") {
		t.Fatalf("exit %d, output %s", code, out)
	}
	st, err := os.Stat(filepath.Join(dir, "whatsapp.session.db"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("session file: %v %v, want mode 0600", st, err)
	}
}

// TestServerDoesNotImportTheAgent: the server binary stays lean; the
// agent's transports (whatsmeow, SQLite) never reach it.
func TestServerDoesNotImportTheAgent(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "../simrelay").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/simrelay/simrelay/agent") || strings.HasPrefix(dep, "go.mau.fi/") || strings.HasPrefix(dep, "modernc.org/") {
			t.Errorf("cmd/simrelay depends on %s", dep)
		}
	}
}

// exitCode is a finished command's exit status (0 when err is nil).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
