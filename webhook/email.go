package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	netmail "net/mail"
	"slices"
	"strings"
	"time"

	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/store"
)

// mailtoScheme marks an entry delivered by e-mail instead of an HTTP POST:
// url "mailto:ops@example.com". It has the scopes, events, retries and
// deliveries log of any entry; an attempt hands the mail to the server's
// mail outbox (which retries SMTP on its own), and is logged with status
// 202 once the mail is in the outbox.
const mailtoScheme = "mailto:"

// Mailer queues e-mail durably (mail.Service).
type Mailer interface {
	Send(ctx context.Context, m mail.Message) error
}

// SetMailer wires the mail outbox that e-mail entries are delivered
// through; call it before serving. Without one, they are not sent.
func (s *Service) SetMailer(m Mailer) { s.mailer = m }

// isMailto reports whether an entry's URL is an e-mail address. A
// scheme's case means nothing (RFC 3986 3.1): MAILTO: is mailto: too, at
// PUT and at delivery alike, so no entry can pass the check as one kind
// and be delivered as the other.
func isMailto(u string) bool { return hasSchemeFold(u, mailtoScheme) }

// mailtoAddress is the address of an entry's URL that isMailto accepts.
func mailtoAddress(u string) string { return u[len(mailtoScheme):] }

// checkMailto reads a mailto: URL (its scheme in any case) as one plain
// address (no name, no headers, no second recipient) and returns it in its
// stored form: the scheme in lower case, the address as written.
func checkMailto(raw string) (string, error) {
	addr := strings.TrimSpace(mailtoAddress(raw))
	a, err := netmail.ParseAddress(addr)
	if err != nil || a.Address != addr || a.Name != "" || strings.ContainsAny(addr, "?,;") {
		return "", fmt.Errorf("must be mailto: and one e-mail address, e.g. mailto:ops@example.com")
	}
	return mailtoScheme + addr, nil
}

// companyAddress returns the verified e-mail of the user of the company
// whose address addr is, as the accounts compare addresses (lower-cased
// with strings.ToLower, both sides), or "" when no user's is. E-mail
// entries go only to the company's own people, so the server's mail can
// never be pointed at a stranger's inbox: an invitee who has not accepted
// (whose address is anyone's the company typed) is not one yet. Each
// delivery asks again, so a user removed since gets nothing; and the mail
// goes to the address as the user's account holds it, never as the entry
// spells it (strings.EqualFold took "ſam@" for "sam@", and the mail went
// to the other mailbox as typed).
func (s *Service) companyAddress(companyID uint64, addr string) (string, error) {
	users, err := s.store.CompanyUsers(companyID)
	if err != nil {
		return "", err
	}
	want := strings.ToLower(addr)
	for _, u := range users {
		if u.EmailVerified && strings.ToLower(u.Email) == want {
			return u.Email, nil
		}
	}
	return "", nil
}

// eventMail is the part of an event body an e-mail shows.
type eventMail struct {
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"`
	Data      struct {
		Phone             string `json:"phone"`
		To                string `json:"to"`
		Message           string `json:"message"`
		Channel           string `json:"channel"`
		DeviceFingerprint string `json:"device_fingerprint"`
		SIMSlot           string `json:"sim_slot"`
		ReceivedAt        string `json:"received_at"`
		Status            string `json:"status"`
		Error             string `json:"error"`
		// A device event's.
		DeviceName string `json:"device_name"`
		LastSeenAt string `json:"last_seen_at"`
		Battery    *int   `json:"battery"`
		Charging   *bool  `json:"charging"`
	} `json:"data"`
}

// mailFor renders a delivery as an e-mail: for a received message, the
// sender in the subject and the text as the body; for a status event, the
// recipient and the status; for a device event, the device and what
// happened to it (deviceMail).
func mailFor(to string, d store.WebhookDelivery) (mail.Message, error) {
	var ev eventMail
	if err := json.Unmarshal(d.Body, &ev); err != nil {
		return mail.Message{}, fmt.Errorf("the event cannot be read: %v", err)
	}
	data := ev.Data
	channel := data.Channel
	if channel == "" {
		channel = "sms"
	}
	label := map[string]string{"sms": "SMS", "whatsapp": "WhatsApp message", "imessage": "iMessage"}[channel]
	if label == "" {
		label = "message"
	}
	var subject string
	var b strings.Builder
	if slices.Contains(deviceEventTypes, ev.Type) {
		subject, text := deviceMail(ev)
		return mail.Message{To: to, Subject: clip(subject), Text: text + fmt.Sprintf("Event: %s, %s\n", ev.Type, d.UUID)}, nil
	}
	if strings.HasSuffix(ev.Type, ".received") {
		subject = fmt.Sprintf("%s from %s", label, oneLine(data.Phone))
		b.WriteString(data.Message)
		b.WriteString("\n\n-- \n")
		fmt.Fprintf(&b, "From: %s\n", data.Phone)
		if data.To != "" {
			fmt.Fprintf(&b, "To: %s\n", data.To)
		}
		if data.DeviceFingerprint != "" {
			fmt.Fprintf(&b, "Device: %s", data.DeviceFingerprint)
			if data.SIMSlot != "" {
				fmt.Fprintf(&b, " (%s)", data.SIMSlot)
			}
			b.WriteString("\n")
		}
		if data.ReceivedAt != "" {
			fmt.Fprintf(&b, "Received: %s\n", data.ReceivedAt)
		}
	} else {
		subject = fmt.Sprintf("%s to %s: %s", label, oneLine(data.To), oneLine(data.Status))
		fmt.Fprintf(&b, "The %s to %s is %s", label, data.To, data.Status)
		if data.Error != "" {
			fmt.Fprintf(&b, " (%s)", data.Error)
		}
		b.WriteString(".\n")
	}
	fmt.Fprintf(&b, "Event: %s, %s\n", ev.Type, d.UUID)
	return mail.Message{To: to, Subject: clip(subject), Text: b.String()}, nil
}

// deviceMail is the subject and the text, without the event's line, of a
// device event: the device by name and fingerprint, what happened, when it
// was last seen and its battery.
func deviceMail(ev eventMail) (subject, text string) {
	data := ev.Data
	device := oneLine(data.DeviceFingerprint)
	if name := oneLine(data.DeviceName); name != "" {
		device = name + " (" + device + ")"
	}
	var b strings.Builder
	switch ev.Type {
	case EventDeviceBatteryLow:
		subject = "Device " + device + ": battery low"
		if data.Battery != nil {
			subject += fmt.Sprintf(", %d %%", *data.Battery)
		}
		fmt.Fprintf(&b, "The battery of the device %s is low.\n", device)
	case EventDeviceOffline:
		subject = "Device " + device + " is offline"
		fmt.Fprintf(&b, "The device %s is offline.\n", device)
	default:
		subject = "Device " + device + " is online"
		fmt.Fprintf(&b, "The device %s is online.\n", device)
	}
	b.WriteString("\n-- \n")
	if data.LastSeenAt != "" {
		fmt.Fprintf(&b, "Last seen: %s\n", data.LastSeenAt)
	}
	if data.Battery != nil {
		fmt.Fprintf(&b, "Battery: %d %%", *data.Battery)
		if data.Charging != nil {
			if *data.Charging {
				b.WriteString(", charging")
			} else {
				b.WriteString(", not charging")
			}
		}
		b.WriteString("\n")
	}
	return subject, b.String()
}

// oneLine keeps a subject's part on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// sendMail makes one attempt at an e-mail delivery: the mail goes into the
// outbox, or the attempt fails and is retried as any other.
func (s *Service) sendMail(ctx context.Context, target string, d store.WebhookDelivery) outcome {
	if s.mailer == nil {
		return outcome{err: "not sent: e-mail is not wired into this server", notSent: true}
	}
	start := time.Now()
	addr, err := s.companyAddress(d.CompanyID, mailtoAddress(target))
	switch {
	case err != nil:
		return outcome{url: target, err: clip("the company's users could not be read: " + err.Error())}
	case addr == "":
		return outcome{url: target, err: "not sent: the address is no longer the verified e-mail of a user of the company", notSent: true}
	}
	m, err := mailFor(addr, d)
	if err != nil {
		return outcome{url: target, err: clip(err.Error()), notSent: true}
	}
	m.CompanyID = d.CompanyID
	if err := s.mailer.Send(ctx, m); err != nil {
		if full := (*store.MailOutboxFullError)(nil); errors.As(err, &full) {
			// As a full webhook outbox: the operator hears of it, and the
			// delivery fails and is retried on the schedule, by which time
			// the company's mails ahead of it may have gone.
			s.log.Warn("mail outbox full for the company: the e-mail delivery fails and is retried",
				"company", d.CompanyID, "webhook_id", d.WebhookID, "delivery", d.UUID,
				"pending", full.Pending, "pending_bytes", full.PendingBytes)
			return outcome{url: target, err: clip("not queued: " + full.Error()), duration: time.Since(start)}
		}
		return outcome{url: target, err: clip("the mail could not be queued: " + err.Error()), duration: time.Since(start)}
	}
	return outcome{url: target, status: http.StatusAccepted, duration: time.Since(start)}
}
