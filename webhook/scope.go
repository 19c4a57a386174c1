package webhook

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/egress"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Limits of one entry.
const (
	maxURLLength  = 2048 // what browsers and most proxies take
	maxScopeItems = 500  // per list: more devices than a company pairs
	maxScopeItem  = 254  // the longest e-mail address
)

// Inbound is an inbound message as scopes see it.
type Inbound struct {
	Channel string // sms, whatsapp or imessage
	Device  string // fingerprint of the receiving device or agent
	SIMSlot string // SIM1 or SIM2, SMS only
	// Number is the WhatsApp number or iMessage handle that received the
	// message, and NumberID its id (wa_... or im_...).
	Number, NumberID string
}

// Matches reports whether an entry's scope takes the message. Each list
// narrows only what it names, and an empty list matches all: devices every
// channel, sims SMS only, wa_numbers WhatsApp only, im_handles iMessage
// only. Whether the entry is active is the caller's business.
func Matches(e store.WebhookEntry, in Inbound) bool {
	if len(e.Channels) > 0 && !slices.Contains(e.Channels, in.Channel) {
		return false
	}
	if len(e.Devices) > 0 && !slices.Contains(e.Devices, in.Device) {
		return false
	}
	switch in.Channel {
	case proto.ChannelSMS:
		if len(e.SIMs) > 0 && !slices.Contains(e.SIMs, simIndex(in.SIMSlot)) {
			return false
		}
	case proto.ChannelWhatsApp:
		if len(e.WANumbers) > 0 && !containsNumber(e.WANumbers, in) {
			return false
		}
	case proto.ChannelIMessage:
		if len(e.IMHandles) > 0 && !containsNumber(e.IMHandles, in) {
			return false
		}
	}
	return true
}

// simIndex is the entry's spelling of a SIM slot: 0 for SIM1, 1 for SIM2.
func simIndex(slot string) int {
	switch slot {
	case proto.SIM1:
		return 0
	case proto.SIM2:
		return 1
	}
	return -1
}

// containsNumber reports whether list names the message's number or
// handle, by its id or by its address. Addresses are compared as they are
// stored, lower-cased by strings.ToLower on both sides (validEntry, and the
// server's reading of a handle an agent announces): strings.EqualFold folds
// more, so it would take the handle ſam@example.com (the long s, a handle
// of its own) for sam@example.com.
func containsNumber(list []string, in Inbound) bool {
	number := strings.ToLower(in.Number)
	for _, v := range list {
		if (in.NumberID != "" && v == in.NumberID) || (number != "" && strings.ToLower(v) == number) {
			return true
		}
	}
	return false
}

// EntryInput is one entry of a PUT, as the client sent it.
type EntryInput struct {
	ID        *int64 // nil: a new entry
	URL       string
	Active    *bool // nil: true
	Devices   []string
	SIMs      []int
	Channels  []string
	WANumbers []string
	IMHandles []string
	Events    []string // nil or empty: the inbound types only
}

// validEntry checks one entry (all but its id, which needs the stored set)
// and returns it in stored form. Field paths are prefixed with at. A number
// in wa_numbers or im_handles is read in the company's region, as the
// number an agent announces is (numplan.Reported): written without its
// country code there ("07400 654321" in GB), or with the + dropped as
// WhatsApp writes it ("447400654321"), it is stored, shown and matched as
// the E.164 number the company's number list shows.
func validEntry(in EntryInput, at string, allowPrivate bool, region string) (store.WebhookEntry, error) {
	var u string
	var err error
	if isMailto(strings.TrimSpace(in.URL)) {
		u, err = checkMailto(strings.TrimSpace(in.URL))
	} else {
		u, err = CheckURL(in.URL, allowPrivate)
	}
	if err != nil {
		return store.WebhookEntry{}, problem.Invalid(at+".url", err.Error())
	}
	e := store.WebhookEntry{URL: u, Active: in.Active == nil || *in.Active}
	// A fingerprint is checked for its form alone, not against the device
	// list: an entry may name a phone before it is paired, and another
	// company's fingerprint is taken as an unknown one (it matches nothing,
	// since an entry sees its own company's messages only), so the answer
	// tells nothing of other companies' devices. A value no device can
	// carry ("pixel 7", "a/b") was stored and matched nothing, without a
	// word to the admin who mistyped it.
	if e.Devices, err = scopeList(in.Devices, at+".devices", func(v string) (string, error) {
		if strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("must be a device fingerprint, not an empty string")
		}
		if !device.IsFingerprint(v) {
			return "", fmt.Errorf("must be a device fingerprint: 1 to 128 letters, digits, dots, dashes, underscores or colons")
		}
		return v, nil
	}); err != nil {
		return e, err
	}
	for i, v := range in.SIMs {
		if v != 0 && v != 1 {
			return e, problem.Invalid(fmt.Sprintf("%s.sims[%d]", at, i), "must be 0 (SIM1) or 1 (SIM2)")
		}
		if !slices.Contains(e.SIMs, v) {
			e.SIMs = append(e.SIMs, v)
		}
	}
	if e.Channels, err = scopeList(in.Channels, at+".channels", func(v string) (string, error) {
		switch v {
		case proto.ChannelSMS, proto.ChannelWhatsApp, proto.ChannelIMessage:
			return v, nil
		}
		return "", fmt.Errorf("must be sms, whatsapp or imessage")
	}); err != nil {
		return e, err
	}
	if e.WANumbers, err = scopeList(in.WANumbers, at+".wa_numbers", func(v string) (string, error) {
		if strings.HasPrefix(v, "wa_") {
			return v, nil
		}
		if n, err := scopeNumber(v, region); err == nil {
			return n, nil
		}
		return "", fmt.Errorf("must be a number id (wa_...) or %s", numberForm(region))
	}); err != nil {
		return e, err
	}
	if e.IMHandles, err = scopeList(in.IMHandles, at+".im_handles", func(v string) (string, error) {
		switch {
		case strings.HasPrefix(v, "im_"):
			return v, nil
		case strings.Contains(v, "@") && !strings.ContainsAny(v, " \t\r\n"):
			return strings.ToLower(v), nil
		}
		if n, err := scopeNumber(v, region); err == nil {
			return n, nil
		}
		return "", fmt.Errorf("must be a handle id (im_...), an e-mail address or %s", numberForm(region))
	}); err != nil {
		return e, err
	}
	if e.Events, err = scopeList(in.Events, at+".events", checkEventType); err != nil {
		return e, err
	}
	return e, nil
}

// scopeNumber reads a number of wa_numbers or im_handles in the company's
// region ("" for none: E.164 only), as channel.Announce reads the number
// the entry names.
func scopeNumber(v, region string) (string, error) { return numplan.Reported(v, region) }

// numberForm says which numbers a scope takes.
func numberForm(region string) string {
	if region == "" {
		return "an E.164 number (+ and the country code)"
	}
	return "a phone number (+ and the country code, or national as written in " + region + ")"
}

// scopeRegion reports whether a scope's numbers need the company's region:
// one of them is not an id, an e-mail address or written with its +.
func scopeRegion(entries []EntryInput) bool {
	for _, in := range entries {
		for _, list := range [][]string{in.WANumbers, in.IMHandles} {
			for _, v := range list {
				v = strings.TrimSpace(v)
				if v != "" && !strings.HasPrefix(v, "wa_") && !strings.HasPrefix(v, "im_") && !strings.HasPrefix(v, "+") && !strings.Contains(v, "@") {
					return true
				}
			}
		}
	}
	return false
}

// scopeList checks and normalises each value of a list, dropping repeats.
// A fault of one value names it: field[i].
func scopeList(in []string, field string, check func(string) (string, error)) ([]string, error) {
	if len(in) > maxScopeItems {
		return nil, problem.Invalid(field, fmt.Sprintf("must hold at most %d values", maxScopeItems))
	}
	var out []string
	for i, v := range in {
		at := fmt.Sprintf("%s[%d]", field, i)
		if len(v) > maxScopeItem {
			return nil, problem.Invalid(at, fmt.Sprintf("must be at most %d characters", maxScopeItem))
		}
		n, err := check(v)
		if err != nil {
			return nil, problem.Invalid(at, err.Error())
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// isHTTPS reports whether a stored receiver URL is https. The scheme is
// matched in any case, as CheckURL (net/url) takes it: an entry saved as
// HTTPS://... is an https entry.
func isHTTPS(raw string) bool { return hasSchemeFold(raw, "https://") }

// hasSchemeFold reports whether raw starts with scheme, in any case: the
// one test behind isHTTPS and isMailto.
func hasSchemeFold(raw, scheme string) bool {
	return len(raw) >= len(scheme) && strings.EqualFold(raw[:len(scheme)], scheme)
}

// CheckURL validates a receiver URL as PUT takes it and returns it trimmed.
// It must be absolute https (http too with allowPrivate). Without
// allowPrivate, a host that is a literal non-public IP address, or
// localhost, is refused here; names are checked again at connect time,
// after DNS. The error is one human sentence.
func CheckURL(raw string, allowPrivate bool) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", fmt.Errorf("is required")
	}
	if len(raw) > maxURLLength {
		return "", fmt.Errorf("must be at most %d characters", maxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return "", fmt.Errorf("must be an absolute URL such as https://hooks.example.com/sms")
	}
	if u.User != nil {
		// The URL is shown to every admin and written to exports and logs: no
		// place for a secret. The receiver checks the request's signature.
		return "", fmt.Errorf("must not carry a user name or password (user:password@); receivers check the X-Service-Signature instead")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !allowPrivate {
			return "", fmt.Errorf("must use https (http only when the server runs with --webhook-allow-private)")
		}
	default:
		if allowPrivate {
			return "", fmt.Errorf("must be an https or http URL")
		}
		return "", fmt.Errorf("must be an https URL")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return "", fmt.Errorf("must name a host")
	}
	if err := egress.Port(u.Port()); err != nil {
		return "", err
	}
	if allowPrivate {
		return raw, nil
	}
	if err := egress.Host(host); err != nil {
		return "", fmt.Errorf("%w; such addresses need the server to run with --webhook-allow-private", err)
	}
	return raw, nil
}
