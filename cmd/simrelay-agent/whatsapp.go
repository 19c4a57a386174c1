package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/skip2/go-qrcode"
	"go.mau.fi/whatsmeow"

	"github.com/simrelay/simrelay/agent/whatsapp"
)

// defaultSessionPath is the WhatsApp session file next to the configuration.
func defaultSessionPath(config string) string {
	return filepath.Join(filepath.Dir(config), "whatsapp.session.db")
}

// whatsappCmd is `simrelay-agent whatsapp link`: it links this agent to a
// WhatsApp account as a companion device, by a QR code scanned in
// WhatsApp > Settings > Linked devices.
func whatsappCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "link" {
		fmt.Fprintln(stderr, "usage: simrelay-agent whatsapp link [--config FILE] [--session FILE] [--qr-png FILE]")
		return 2
	}
	fs := flag.NewFlagSet("whatsapp link", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", defaultConfigPath(), "the configuration file written by pair; the session file is next to it")
	session := fs.String("session", "", "the WhatsApp session file (default: whatsapp.session.db next to --config)")
	png := fs.String("qr-png", "", "also write each QR code to this PNG file (default: whatsapp-qr.png next to --config)")
	if err := parse(fs, args[1:]); err != nil {
		return parseExit(stderr, fs, err)
	}
	if *session == "" {
		*session = defaultSessionPath(*config)
	}
	if *png == "" {
		*png = filepath.Join(filepath.Dir(*config), "whatsapp-qr.png")
	}
	if err := linkWhatsApp(ctx, *session, *png, stdout); err != nil {
		fmt.Fprintln(stderr, "simrelay-agent whatsapp link:", err)
		return 1
	}
	return 0
}

func linkWhatsApp(ctx context.Context, session, png string, stdout io.Writer) error {
	s, err := whatsapp.OpenSession(ctx, session)
	if err != nil {
		return err
	}
	defer s.Close()
	cl, raw, err := s.NewClient(ctx)
	if err != nil {
		return err
	}
	if cl.IsLoggedIn() {
		fmt.Fprintf(stdout, "%s is already linked to +%s; delete it to link another account.\n", session, cl.Own().User)
		return nil
	}
	qrs, err := raw.GetQRChannel(ctx)
	if err != nil {
		return err
	}
	if err := raw.Connect(); err != nil {
		return fmt.Errorf("connect to WhatsApp: %w", err)
	}
	defer raw.Disconnect()
	for item := range qrs {
		switch {
		case item.Event == whatsmeow.QRChannelEventCode:
			if err := showQR(stdout, item.Code, png); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "Scan it in WhatsApp > Settings > Linked devices > Link a device (valid %s; also in %s)\n", item.Timeout, png)
		case item == whatsmeow.QRChannelSuccess:
			fmt.Fprintf(stdout, "Linked to +%s. The session is in %s (mode 0600): keep it private.\n", cl.Own().User, session)
			return nil
		case item.Event == whatsmeow.QRChannelEventError:
			return fmt.Errorf("linking failed: %w", item.Error)
		default:
			return fmt.Errorf("linking ended without a scan (%s): run the command again", item.Event)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("linking ended without a scan: run the command again")
}

// showQR prints code as a QR code made of block characters (a terminal
// shows it at any size) and writes it to png, with mode 0600: the code
// holds the session's pairing keys, its advertising secret among them.
func showQR(w io.Writer, code, png string) error {
	q, err := qrcode.New(code, qrcode.Low)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, strings.TrimRight(q.ToSmallString(false), "\n"))
	if png == "" {
		return nil
	}
	data, err := q.PNG(512)
	if err != nil {
		return err
	}
	if err := writePrivate(png, data); err != nil {
		return fmt.Errorf("write %s: %w", png, err)
	}
	return nil
}

// writePrivate writes data to path, readable by this user only, also
// when path was a file readable by others.
func writePrivate(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
