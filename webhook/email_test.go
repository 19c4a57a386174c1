package webhook

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/mail/mailtest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// TestEmailEntry: an entry whose url is mailto: and the address of a user
// of the company gets each inbound SMS in its scope as an e-mail, through
// the server's mail outbox to a real SMTP inbox; an address of no user of
// the company is refused.
func TestEmailEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.addDevice("phone-2")
	svc, inbox := f.mailing()

	for _, url := range []string{"mailto:stranger@example.com", "mailto:ana@example.com,bob@example.com", "mailto:Ana <ana@example.com>", "mailto:ana@example.com?subject=x"} {
		_, err := svc.Replace(context.Background(), f.company, []EntryInput{{URL: url}})
		if pe, ok := problem.As(err); !ok || pe.Field != "webhooks[0].url" {
			t.Errorf("%s: got %v, want a refusal of webhooks[0].url", url, err)
		}
	}
	f.configure(svc, EntryInput{URL: "mailto:ana@example.com", Devices: []string{f.device}})
	f.inbound(svc, "phone-2", "SIM1", time.Now()) // out of the entry's scope
	m := f.inbound(svc, f.device, "SIM1", time.Now())
	got := inbox.WaitFor(t, "ana@example.com", 10*time.Second)
	if got.Subject != "SMS from +15550100001" || !strings.HasPrefix(got.Text, m.Text+"\n") || !strings.Contains(got.Text, "Device: "+f.device) {
		t.Errorf("mail: subject %q text %q; want the sender in the subject and %q first in the text", got.Subject, got.Text, m.Text)
	}
	eventually(t, "the delivery is logged", func() bool {
		lines := f.lines()
		return len(lines) == 1 && lines[0].StatusCode == http.StatusAccepted
	})
	if n := len(inbox.Messages()); n != 1 {
		t.Errorf("the inbox holds %d mails, want 1 (the other device is out of scope)", n)
	}
}

// TestEmailEntryOnlyToVerifiedMembers: an address the company invited but
// whose owner never accepted is a stranger's inbox, refused as any other;
// an entry whose user is removed afterwards sends nothing more (its
// deliveries are logged as not sent).
func TestEmailEntryOnlyToVerifiedMembers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	svc, inbox := f.mailing()

	invited := store.User{CompanyID: f.company, Email: "victim@example.com", Role: store.RoleMember, CreatedAt: time.Now()}
	if _, err := f.st.InviteUser(&invited, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Replace(context.Background(), f.company, []EntryInput{{URL: "mailto:victim@example.com"}})
	if pe, ok := problem.As(err); !ok || pe.Field != "webhooks[0].url" {
		t.Fatalf("mailto: of an invitee who never accepted: got %v, want a refusal of webhooks[0].url", err)
	}

	bob := store.User{CompanyID: f.company, FirstName: "Bob", Email: "bob@example.com", EmailVerified: true, PasswordHash: "x", Role: store.RoleMember}
	if err := f.st.CreateUser(&bob); err != nil {
		t.Fatal(err)
	}
	f.configure(svc, EntryInput{URL: "mailto:bob@example.com"})
	if err := f.st.DeleteUser(bob.ID); err != nil {
		t.Fatal(err)
	}
	f.inbound(svc, f.device, "SIM1", time.Now())
	eventually(t, "the delivery is logged", func() bool { return len(f.lines()) == 1 })
	if l := f.lines()[0]; l.StatusCode != 0 || !strings.Contains(l.Error, "not sent") {
		t.Errorf("delivery to a removed user: status %d error %q, want not sent", l.StatusCode, l.Error)
	}
	if n := len(inbox.Messages()); n != 0 {
		t.Errorf("the inbox holds %d mails, want none for a removed user", n)
	}
}

// mailing is a webhook service of f's store that sends its e-mail entries
// through the server's mail outbox to a real SMTP inbox, both running
// until the test ends.
func (f *fixture) mailing() (*Service, *mailtest.Inbox) {
	t := f.t
	t.Helper()
	inbox := mailtest.NewInbox(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mailer, err := mail.New(mail.Config{SMTPURL: inbox.URL()}, f.st, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{}, f.st, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	svc.SetMailer(mailer)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = mailer.Run(ctx) })
	wg.Go(func() { _ = svc.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return svc, inbox
}

// TestEmailEntryDeviceEvents: an e-mail entry that asks for device events
// gets each as a mail that names the device and what happened to it.
func TestEmailEntryDeviceEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	svc, inbox := f.mailing()
	f.st.SetDeviceEvents(svc.DeviceEvents())
	f.configure(svc, EntryInput{URL: "mailto:ana@example.com", Events: []string{EventDeviceBatteryLow, EventDeviceOffline}})
	d, err := f.st.Device(f.device)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 10, 4, 9, 512e6, time.UTC)
	battery, charging := 14, false
	if _, err := f.st.UpdateDeviceWith(f.company, d.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		d.Name, d.LastSeenAt = "Front desk", at
		d.Health = &store.DeviceHealth{Battery: &battery, Charging: &charging, ReportedAt: at}
		return []store.DeviceEvent{{Type: EventDeviceBatteryLow, At: at}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	got := inbox.WaitFor(t, "ana@example.com", 10*time.Second)
	if want := "Device Front desk (phone-1): battery low, 14 %"; got.Subject != want || !strings.Contains(got.Text, "Battery: 14 %, not charging") {
		t.Errorf("battery mail: subject %q text %q; want subject %q and the battery in the text", got.Subject, got.Text, want)
	}
	if _, err := f.st.UpdateDeviceWith(f.company, d.ID, func(d *store.Device) ([]store.DeviceEvent, error) {
		return []store.DeviceEvent{{Type: EventDeviceOffline, At: at.Add(time.Minute)}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the offline mail", func() bool { return len(inbox.Messages()) == 2 })
	var subjects []string
	for _, m := range inbox.Messages() {
		subjects = append(subjects, m.Subject)
		if !strings.Contains(m.Text, "Last seen: 2026-11-22T10:04:09.512Z") ||
			m.Subject == "Device Front desk (phone-1) is offline" && !strings.Contains(m.Text, "The device Front desk (phone-1) is offline.") {
			t.Errorf("mail %q: text %q; want the device, its state and when it was last seen", m.Subject, m.Text)
		}
	}
	if !slices.Contains(subjects, "Device Front desk (phone-1) is offline") {
		t.Errorf("subjects %q; want the offline mail's", subjects)
	}
}

// TestEmailEntryGoesToTheAccountsAddress: an entry's address is matched to
// a user's as the accounts compare addresses (lower-cased), and the mail
// goes to the address the account holds, not as the entry spells it; an
// address that only case-folding beyond lower-casing takes for a user's
// ("ſam@", with a long s, for "sam@") is another mailbox, refused.
func TestEmailEntryGoesToTheAccountsAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	svc, inbox := f.mailing()

	sam := store.User{CompanyID: f.company, FirstName: "Sam", Email: "sam@example.com", EmailVerified: true, PasswordHash: "x", Role: store.RoleMember}
	if err := f.st.CreateUser(&sam); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Replace(context.Background(), f.company, []EntryInput{{URL: "mailto:ſam@example.com"}})
	if pe, ok := problem.As(err); !ok || pe.Field != "webhooks[0].url" {
		t.Fatalf("mailto:ſam@example.com beside the user sam@example.com: got %v, want a refusal of webhooks[0].url", err)
	}

	f.configure(svc, EntryInput{URL: "mailto:SAM@Example.COM"})
	f.inbound(svc, f.device, "SIM1", time.Now())
	got := inbox.WaitFor(t, "sam@example.com", 10*time.Second)
	if !slices.Equal(got.To, []string{"sam@example.com"}) {
		t.Errorf("the mail went to %q, want the account's address [sam@example.com]", got.To)
	}
}
