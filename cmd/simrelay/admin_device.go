package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/webhook"
)

// adminDeleteDevice deletes a device of a company, named by its fingerprint
// as given: the way to delete a device no API path can name. A device
// registered as "." or ".." before such fingerprints were refused is one:
// every address is cleaned of dot segments (/device/.. is /), so neither
// the API nor the console reaches it. It is the API's delete: the token is
// revoked, the queued messages fail (device_deleted) with their webhook
// events, the company's activity says so.
func adminDeleteDevice(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, where := adminFlags("delete-device", stderr)
	company := fs.Uint64("company", 0, "the company's id (required)")
	fingerprint := fs.String("device", "", "the device's fingerprint, exactly as stored (required), e.g. ..")
	fs.Usage = flagUsage(fs, "Usage: simrelay admin delete-device --company ID --device FINGERPRINT [--data-dir D | --database-url URL]\n\n")
	if err := parseFlags(fs, args, 0); err != nil {
		return usageOrHelp(err)
	}
	if *company == 0 {
		return usageError{fmt.Errorf("--company: the company's id is required")}
	}
	if *fingerprint == "" {
		return usageError{fmt.Errorf("--device: the device's fingerprint is required")}
	}
	where.existing = true
	st, err := openBackend(ctx, *where)
	if err != nil {
		return err
	}
	defer st.Close()
	now := backendClock(st)
	// The delete fails the device's queued messages: each writes its
	// message.failed event into the webhook outbox, as the API's delete does,
	// for a server to deliver.
	hooks, err := webhook.New(webhook.Config{}, st, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), now)
	if err != nil {
		return err
	}
	st.SetStatusEvents(hooks.StatusEvents())
	devices := device.New(device.Config{}, st, now)
	if _, err := devices.Delete(ctx, *company, *fingerprint); err != nil {
		if problem.Is(err, problem.NotFound) {
			return fmt.Errorf("company %d has no device %q", *company, *fingerprint)
		}
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]any{"companyId": *company, "deviceFingerprint": *fingerprint, "deleted": true})
}
