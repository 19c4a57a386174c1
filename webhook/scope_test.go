package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

func TestMatches(t *testing.T) {
	t.Parallel()
	sms1 := Inbound{Channel: "sms", Device: "A", SIMSlot: "SIM1"}
	sms2 := Inbound{Channel: "sms", Device: "B", SIMSlot: "SIM2"}
	wa := Inbound{Channel: "whatsapp", Device: "A", Number: "+15550100009", NumberID: "wa_1"}
	im := Inbound{Channel: "imessage", Device: "mac", Number: "ana@example.com", NumberID: "im_7"}
	tests := []struct {
		name  string
		entry store.WebhookEntry
		in    Inbound
		want  bool
	}{
		{"empty scope takes sms", store.WebhookEntry{}, sms1, true},
		{"empty scope takes whatsapp", store.WebhookEntry{}, wa, true},
		{"device listed", store.WebhookEntry{Devices: []string{"A"}}, sms1, true},
		{"device not listed", store.WebhookEntry{Devices: []string{"A"}}, sms2, false},
		{"devices scope whatsapp too", store.WebhookEntry{Devices: []string{"B"}}, wa, false},
		{"sim 0 is SIM1", store.WebhookEntry{SIMs: []int{0}}, sms1, true},
		{"sim 0 is not SIM2", store.WebhookEntry{SIMs: []int{0}}, sms2, false},
		{"sim 1 is SIM2", store.WebhookEntry{SIMs: []int{1}}, sms2, true},
		{"both sims", store.WebhookEntry{SIMs: []int{0, 1}}, sms2, true},
		{"sims do not scope whatsapp", store.WebhookEntry{SIMs: []int{1}}, wa, true},
		{"channel sms", store.WebhookEntry{Channels: []string{"sms"}}, sms1, true},
		{"channel whatsapp only", store.WebhookEntry{Channels: []string{"whatsapp"}}, sms1, false},
		{"channel whatsapp", store.WebhookEntry{Channels: []string{"whatsapp"}}, wa, true},
		{"wa number by phone", store.WebhookEntry{WANumbers: []string{"+15550100009"}}, wa, true},
		{"wa number by id", store.WebhookEntry{WANumbers: []string{"wa_1"}}, wa, true},
		{"other wa number", store.WebhookEntry{WANumbers: []string{"wa_2"}}, wa, false},
		{"wa numbers do not scope sms", store.WebhookEntry{WANumbers: []string{"wa_2"}}, sms1, true},
		{"im handle by address", store.WebhookEntry{IMHandles: []string{"ana@example.com"}}, im, true},
		{"im handle by id", store.WebhookEntry{IMHandles: []string{"im_7"}}, im, true},
		{"other im handle", store.WebhookEntry{IMHandles: []string{"im_8"}}, im, false},
		{"im handles do not scope whatsapp", store.WebhookEntry{IMHandles: []string{"im_8"}}, wa, true},
		{"all narrowings agree", store.WebhookEntry{Devices: []string{"B"}, SIMs: []int{1}, Channels: []string{"sms"}}, sms2, true},
		{"one narrowing refuses", store.WebhookEntry{Devices: []string{"B"}, SIMs: []int{0}, Channels: []string{"sms"}}, sms2, false},
	}
	for _, tt := range tests {
		if got := Matches(tt.entry, tt.in); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestReplaceValidates(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	svc, _ := f.start(Config{}, nil)
	good := EntryInput{URL: "https://hooks.example.com/sms"}
	tests := []struct {
		name    string
		entries []EntryInput
		field   string
	}{
		{"missing set", nil, "webhooks"},
		{"too many", make([]EntryInput, MaxEntries+1), "webhooks"},
		{"no url", []EntryInput{good, {}}, "webhooks[1].url"},
		{"http", []EntryInput{{URL: "http://hooks.example.com"}}, "webhooks[0].url"},
		{"loopback", []EntryInput{good, good, {URL: "https://127.0.0.1/x"}}, "webhooks[2].url"},
		{"metadata", []EntryInput{{URL: "https://169.254.169.254/latest"}}, "webhooks[0].url"},
		{"credentials", []EntryInput{good, {URL: "https://user:pw@hooks.example.com/sms"}}, "webhooks[1].url"},
		{"event", []EntryInput{{URL: good.URL, Events: []string{"sms.received", "message.read"}}}, "webhooks[0].events[1]"},
		{"sim 2", []EntryInput{{URL: good.URL, SIMs: []int{2}}}, "webhooks[0].sims[0]"},
		{"channel", []EntryInput{{URL: good.URL, Channels: []string{"telegram"}}}, "webhooks[0].channels[0]"},
		{"empty device", []EntryInput{{URL: good.URL, Devices: []string{""}}}, "webhooks[0].devices[0]"},
		{"device with a space", []EntryInput{{URL: good.URL, Devices: []string{"pixel7", "a b"}}}, "webhooks[0].devices[1]"},
		{"device with a slash", []EntryInput{{URL: good.URL, Devices: []string{"pixel/7"}}}, "webhooks[0].devices[0]"},
		{"device too long", []EntryInput{{URL: good.URL, Devices: []string{strings.Repeat("d", 129)}}}, "webhooks[0].devices[0]"},
		{"wa number", []EntryInput{{URL: good.URL, WANumbers: []string{"5550100"}}}, "webhooks[0].wa_numbers[0]"},
		{"im handle", []EntryInput{{URL: good.URL, IMHandles: []string{"not a handle"}}}, "webhooks[0].im_handles[0]"},
		{"unknown id", []EntryInput{{ID: ptr(int64(999)), URL: good.URL}}, "webhooks[0].id"},
		{"zero id", []EntryInput{{ID: ptr(int64(0)), URL: good.URL}}, "webhooks[0].id"},
	}
	for _, tt := range tests {
		_, err := svc.Replace(context.Background(), f.company, tt.entries)
		pe, ok := problem.As(err)
		if !ok || pe.Code != problem.ValidationFailed || pe.Field != tt.field {
			t.Errorf("%s: got %v, want validation_failed on %s", tt.name, err, tt.field)
		}
	}
	// Values are normalised and repeats dropped.
	got := f.configure(svc, EntryInput{URL: good.URL, SIMs: []int{1, 1, 0}, Devices: []string{"A", "A"},
		WANumbers: []string{"+1 (555) 010-0009", "wa_3", "+44 (0) 7400 123456"}, IMHandles: []string{"Ana@Example.com", "+49 (0)151 23456789"}})
	e := got[0]
	// A national prefix in brackets is read as everywhere else: dropped.
	if !e.Active || len(e.SIMs) != 2 || len(e.Devices) != 1 || e.WANumbers[0] != "+15550100009" || e.WANumbers[2] != "+447400123456" ||
		e.IMHandles[0] != "ana@example.com" || e.IMHandles[1] != "+4915123456789" {
		t.Fatalf("got %+v, want it active with normalised, de-duplicated lists", e)
	}
	// The same id twice is refused.
	id := int64(e.ID)
	if _, err := svc.Replace(context.Background(), f.company, []EntryInput{{ID: &id, URL: good.URL}, {ID: &id, URL: good.URL}}); !problem.Is(err, problem.ValidationFailed) {
		t.Fatalf("an id twice: got %v, want validation_failed", err)
	}
}

// Numbers in wa_numbers and im_handles are read in the company's region,
// as its agents' numbers are: national, or with the + dropped as WhatsApp
// writes it, each is stored as the E.164 number the number list shows, so
// that it matches. A national number the region's plan has not is refused
// naming the region; without a region, a number needs its + as before.
func TestReplaceReadsScopeNumbersInTheRegion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	svc, _ := f.start(Config{}, nil)
	url := "https://hooks.example.com/sms"
	national := EntryInput{URL: url, WANumbers: []string{"07400 654321", "447400 123456", "wa_3"}, IMHandles: []string{"020 7946 0958", "+1 555 010 0009", "Ana@Example.com"}}
	_, err := svc.Replace(context.Background(), f.company, []EntryInput{national})
	if pe, ok := problem.As(err); !ok || pe.Code != problem.ValidationFailed || pe.Field != "webhooks[0].wa_numbers[0]" || !strings.Contains(pe.Message, "E.164") {
		t.Fatalf("a national number without a region: got %v, want validation_failed on webhooks[0].wa_numbers[0] asking for E.164", err)
	}
	if _, err := f.st.UpdateCompany(f.company, func(c *store.Company) error { c.Region = "GB"; return nil }); err != nil {
		t.Fatal(err)
	}
	e := f.configure(svc, national)[0]
	if fmt.Sprint(e.WANumbers) != "[+447400654321 +447400123456 wa_3]" || fmt.Sprint(e.IMHandles) != "[+442079460958 +15550100009 ana@example.com]" {
		t.Fatalf("stored wa_numbers %v and im_handles %v, want them in E.164", e.WANumbers, e.IMHandles)
	}
	if !Matches(e, Inbound{Channel: "whatsapp", Number: "+447400654321", NumberID: "wa_9"}) || !Matches(e, Inbound{Channel: "imessage", Number: "+442079460958", NumberID: "im_9"}) {
		t.Fatalf("%+v does not take messages of the numbers it names", e)
	}
	if Matches(e, Inbound{Channel: "whatsapp", Number: "+447400654320", NumberID: "wa_8"}) {
		t.Fatalf("%+v takes another number's message", e)
	}
	_, err = svc.Replace(context.Background(), f.company, []EntryInput{{URL: url, IMHandles: []string{"07400 12"}}})
	if pe, ok := problem.As(err); !ok || pe.Field != "webhooks[0].im_handles[0]" || !strings.Contains(pe.Message, "GB") {
		t.Fatalf("a short national number: got %v, want validation_failed on webhooks[0].im_handles[0] naming GB", err)
	}
}

// An address in im_handles matches as handles are stored: both lower-cased
// by strings.ToLower. strings.EqualFold folds further, and took the handle
// ſam@example.com (the long s: a handle of its own, which ToLower keeps)
// for the entry's sam@example.com, so that entry got the other handle's
// messages. A capital that ToLower folds (the Kelvin sign) still matches.
func TestScopeHandlesFoldAsStored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	svc, _ := f.start(Config{}, nil)
	e := f.configure(svc, EntryInput{URL: "https://hooks.example.com/sms", IMHandles: []string{"Sam@Example.com", "\u212Aate@example.com"}})[0]
	if fmt.Sprint(e.IMHandles) != "[sam@example.com kate@example.com]" {
		t.Fatalf("stored im_handles %q, want them lower-cased", e.IMHandles)
	}
	for _, tt := range []struct {
		handle string
		want   bool
	}{
		{"sam@example.com", true},
		{"\u017fam@example.com", false}, // the long s
		{"kate@example.com", true},
		{"\u212Aate@example.com", true}, // a handle stored before it was lower-cased
		{"\u00dfam@example.com", false},
	} {
		if got := Matches(e, Inbound{Channel: "imessage", Number: tt.handle, NumberID: "im_9"}); got != tt.want {
			t.Errorf("handle %q: matched %v, want %v", tt.handle, got, tt.want)
		}
	}
	long := f.configure(svc, EntryInput{URL: "https://hooks.example.com/sms", IMHandles: []string{"\u017fam@example.com"}})[0]
	if Matches(long, Inbound{Channel: "imessage", Number: "sam@example.com", NumberID: "im_9"}) {
		t.Errorf("the entry for %q took sam@example.com's message", long.IMHandles[0])
	}
}
