package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/store/postgres"
)

// openTestBackend opens st read-write, with no server running on it.
func openTestBackend(t *testing.T, st testStore) store.Backend {
	t.Helper()
	var b store.Backend
	var err error
	if st.databaseURL != "" {
		b, err = postgres.Open(context.Background(), st.databaseURL, postgres.Options{})
	} else {
		b, err = boltstore.Open(st.dir, boltstore.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A device registered as ".." before such fingerprints were refused has
// no API path (/device/.. is cleaned to /device): admin delete-device
// deletes it by its fingerprint as stored, as DELETE /device/{fp} would,
// its token revoked, and leaves the company's other devices alone.
func TestAdminDeleteDeviceNoPathCanName(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	admin := func(args ...string) (int, string, string) { return st.admin(t, args...) }
	acmeID, acmeUser := adminCompany(t, admin, "Acme", "you@example.com")
	otherID, _ := adminCompany(t, admin, "Other", "boss@other.example")
	b := openTestBackend(t, st)
	now := time.Now().UTC()
	var devs []store.Device
	for _, fp := range []string{"..", ".", "pixel-1"} {
		devs = append(devs, store.Device{Fingerprint: fp, CompanyID: acmeID, UserID: acmeUser, Name: fp,
			Status: store.DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("token of " + fp), CreatedAt: now})
	}
	if err := b.ProvisionDevices(devs); err != nil {
		t.Fatal(err)
	}
	b.Close()

	company := fmt.Sprint(acmeID)
	for _, fp := range []string{"..", "."} {
		code, out, errOut := admin("delete-device", "--company", company, "--device", fp)
		if code != 0 || !strings.Contains(out, `"deleted":true`) {
			t.Fatalf("delete-device %q: exit %d %q %q, want 0", fp, code, out, errOut)
		}
	}
	b = openTestBackend(t, st)
	for _, fp := range []string{"..", "."} {
		if _, err := b.CompanyDevice(acmeID, fp); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("device %q after delete-device: %v, want not found", fp, err)
		}
		if _, err := b.DeviceByTokenHash([]byte("token of " + fp)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the token of %q after delete-device: %v, want revoked", fp, err)
		}
	}
	if _, err := b.CompanyDevice(acmeID, "pixel-1"); err != nil {
		t.Errorf("the company's other device after delete-device: %v", err)
	}
	b.Close()

	// A device the company does not have, and a device of another company,
	// are said as such; a missing flag is a usage error.
	code, _, errOut := admin("delete-device", "--company", company, "--device", "..")
	if code != 1 || !strings.Contains(errOut, `has no device ".."`) {
		t.Fatalf("delete-device of a deleted device: exit %d %q, want 1 saying there is no such device", code, errOut)
	}
	for _, c := range []uint64{otherID, otherID + 1} {
		code, _, errOut = admin("delete-device", "--company", fmt.Sprint(c), "--device", "pixel-1")
		if code != 1 || !strings.Contains(errOut, `has no device "pixel-1"`) {
			t.Fatalf("delete-device of company %d's device by company %d: exit %d %q, want 1 saying there is no such device", acmeID, c, code, errOut)
		}
	}
	b = openTestBackend(t, st)
	if _, err := b.CompanyDevice(acmeID, "pixel-1"); err != nil {
		t.Errorf("the device after another company's delete-device: %v, want it kept", err)
	}
	b.Close()
	for _, args := range [][]string{{"--company", company}, {"--device", "pixel-1"}} {
		if code, _, errOut = admin(append([]string{"delete-device"}, args...)...); code != 2 {
			t.Fatalf("delete-device %v: exit %d %q, want 2", args, code, errOut)
		}
	}
}

// adminCompany creates a company with `admin create-company` through admin
// and returns the ids it prints.
func adminCompany(t *testing.T, admin func(...string) (int, string, string), name, email string) (companyID, userID uint64) {
	t.Helper()
	code, out, errOut := admin("create-company", "--company", name, "--email", email, "--password", "Change-me-123")
	if code != 0 {
		t.Fatalf("create-company %s: exit %d: %s", name, code, errOut)
	}
	var printed struct {
		CompanyID uint64 `json:"companyId"`
		UserID    uint64 `json:"userId"`
	}
	if err := json.Unmarshal([]byte(out), &printed); err != nil || printed.CompanyID == 0 {
		t.Fatalf("create-company %s printed %q (%v)", name, out, err)
	}
	return printed.CompanyID, printed.UserID
}

// admin delete-device fails the device's queued messages as the API's
// delete does, each with its message.failed event in the webhook outbox,
// which a server then delivers: a company's receiver hears of them.
func TestAdminDeleteDeviceWritesTheFailedEvents(t *testing.T) {
	t.Parallel()
	st := newTestStore(t)
	admin := func(args ...string) (int, string, string) { return st.admin(t, args...) }
	acmeID, acmeUser := adminCompany(t, admin, "Acme", "you@example.com")
	b := openTestBackend(t, st)
	now := time.Now().UTC()
	if err := b.ProvisionDevices([]store.Device{{Fingerprint: "..", CompanyID: acmeID, UserID: acmeUser, Name: "old",
		Status: store.DeviceActive, SelectedSIM: "BOTH", TokenHash: []byte("token of .."), CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.UpdateWebhookSet(acmeID, now, func(w *store.WebhookSet) error {
		w.Entries = []store.WebhookEntry{{URL: "https://hooks.example.com/status", Active: true, Events: []string{"message.failed"}}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	m := store.Message{UUID: "queued-1", CompanyID: acmeID, Device: "..", Channel: "sms", Phone: "+15551000001", Text: "hi", SIMSlot: "SIM1", Segments: 1}
	queued, _, err := b.Enqueue(&m, store.IdempotencyKey{}, time.Now, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()

	if code, out, errOut := admin("delete-device", "--company", fmt.Sprint(acmeID), "--device", ".."); code != 0 {
		t.Fatalf("delete-device: exit %d %q %q, want 0", code, out, errOut)
	}
	b = openTestBackend(t, st)
	defer b.Close()
	if got, err := b.MessageByUUID(acmeID, queued.UUID); err != nil || got.Status != store.MsgFailed || got.Error != "device_deleted" {
		t.Fatalf("the queued message after delete-device: %+v %v, want failed device_deleted", got, err)
	}
	due, _, err := b.DueWebhookDeliveries(time.Now().Add(time.Minute), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].CompanyID != acmeID {
		t.Fatalf("the webhook outbox after delete-device: %+v, want one delivery of the company's", due)
	}
	if job, err := b.WebhookJob(due[0].ID); err != nil || job.Delivery.EventType != "message.failed" {
		t.Fatalf("the delivery after delete-device: %+v %v, want message.failed", job, err)
	}
}
