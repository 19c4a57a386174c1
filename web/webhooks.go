package web

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook"
)

// deliveriesShown is how many lines of the deliveries log the page shows.
const deliveriesShown = 50

func (c *Console) webhookRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"/webhooks", c.page(member, c.webhooksPage))
	mux.HandleFunc("POST "+Prefix+"/webhooks", c.action(admin, Prefix+"/webhooks", c.saveWebhooks))
	mux.HandleFunc("POST "+Prefix+"/webhooks/secret/rotate", c.action(admin, Prefix+"/webhooks", c.rotateSecret))
}

type webhookRow struct {
	Index int
	Entry store.WebhookEntry
	New   bool
	// The row's text fields as the form shows them: the entry's, or what
	// a refused plain post's form held (typedRow).
	URL, Devices, WANumbers, IMHandles string
	// Remove is the row's box to remove its entry, ticked.
	Remove bool
}

// storedRow is the row of entry e at index i of the form.
func storedRow(i int, e store.WebhookEntry, isNew bool) webhookRow {
	return webhookRow{Index: i, Entry: e, New: isNew, URL: e.URL, Devices: strings.Join(e.Devices, ", "),
		WANumbers: strings.Join(e.WANumbers, ", "), IMHandles: strings.Join(e.IMHandles, ", ")}
}

// typedRow is row as a refused plain post's form held it (Typed, kept by
// keepTyped), when that form's row of the same index was of the same
// entry (the new row for the new row): an entry added or removed since
// leaves the rows as the store has them.
func typedRow(row webhookRow, t Typed) webhookRow {
	at := fmt.Sprintf("webhooks[%d].", row.Index)
	kept, ok := t.Values[at+"id"]
	id := ""
	if !row.New {
		id = strconv.FormatUint(row.Entry.ID, 10)
	}
	if t.Action != webhooksAction || !ok || len(kept) != 1 || kept[0] != id {
		return row
	}
	v := func(f string) string { return t.Value(webhooksAction, at+f) }
	e := store.WebhookEntry{ID: row.Entry.ID, Active: v("active") != "false", Channels: t.Values[at+"channels"],
		Events: eventsOf(t.Values[at+"events"])}
	for _, s := range t.Values[at+"sims"] {
		if n, err := strconv.Atoi(s); err == nil {
			e.SIMs = append(e.SIMs, n)
		}
	}
	return webhookRow{Index: row.Index, Entry: e, New: row.New, URL: v("url"), Devices: v("devices"),
		WANumbers: v("wa_numbers"), IMHandles: v("im_handles"), Remove: v("remove") != ""}
}

type webhooksData struct {
	Rows       []webhookRow
	Secret     string
	Deliveries []store.WebhookAttempt
}

func (c *Console) webhooksPage(w http.ResponseWriter, r *http.Request, q *req) error {
	company := q.p().CompanyID
	set, err := c.deps.Webhooks.Settings(r.Context(), company)
	if err != nil {
		return err
	}
	log, err := c.deps.Webhooks.Deliveries(r.Context(), company, 0, deliveriesShown)
	if err != nil {
		return err
	}
	data := webhooksData{Secret: set.Secret, Deliveries: log}
	for i, e := range set.Entries {
		data.Rows = append(data.Rows, storedRow(i, e, false))
	}
	// One blank row to add an entry.
	data.Rows = append(data.Rows, storedRow(len(set.Entries), store.WebhookEntry{Active: true}, true))
	// A refused plain post's rows come back as its form held them: the
	// template draws each row through typedRow.
	c.render(w, r, http.StatusOK, "webhooks", c.viewFor(q, "Webhooks", data))
	return nil
}

var entryField = regexp.MustCompile(`^webhooks\[(\d+)\]`)

// valueIndex ends the path of one value of a list (webhooks[0].events[2]):
// the form shows each list as one field, which the error names instead.
var valueIndex = regexp.MustCompile(`\[\d+\]$`)

// saveWebhooks replaces the whole set, as PUT /webhooks/inbound-sms does.
// Rows left blank or marked for removal are left out; an error names the
// row as the form numbers it.
func (c *Console) saveWebhooks(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	n, err := strconv.Atoi(r.PostFormValue("rows"))
	if err != nil || n < 0 || n > webhook.MaxEntries+1 {
		return outcome{}, problem.Invalid("rows", "is not a row count of this form")
	}
	entries := []webhook.EntryInput{}
	var rowOf []int
	for i := 0; i < n; i++ {
		at := fmt.Sprintf("webhooks[%d].", i)
		f := func(name string) string { return strings.TrimSpace(r.PostFormValue(at + name)) }
		if f("remove") != "" || (f("id") == "" && f("url") == "") {
			continue
		}
		in := webhook.EntryInput{URL: f("url"), Devices: splitList(f("devices")), Channels: r.PostForm[at+"channels"],
			WANumbers: splitList(f("wa_numbers")), IMHandles: splitList(f("im_handles")), Events: eventsOf(r.PostForm[at+"events"])}
		if v := f("id"); v != "" {
			id, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return outcome{}, problem.Invalid(at+"id", "is not a webhook id")
			}
			in.ID = &id
		}
		active := f("active") != "false"
		in.Active = &active
		for _, s := range r.PostForm[at+"sims"] {
			v, err := strconv.Atoi(s)
			if err != nil {
				return outcome{}, problem.Invalid(at+"sims", "must hold only 0 (SIM1) or 1 (SIM2)")
			}
			in.SIMs = append(in.SIMs, v)
		}
		entries = append(entries, in)
		rowOf = append(rowOf, i)
	}
	if _, err := c.deps.Webhooks.Replace(r.Context(), q.p().CompanyID, entries); err != nil {
		if pe, ok := problem.As(err); ok {
			if m := entryField.FindStringSubmatch(pe.Field); m != nil {
				if k, _ := strconv.Atoi(m[1]); k < len(rowOf) {
					return outcome{}, pe.Refield(fmt.Sprintf("webhooks[%d]", rowOf[k]) + valueIndex.ReplaceAllString(pe.Field[len(m[0]):], ""))
				}
			}
		}
		return outcome{}, err
	}
	return outcome{Notice: "Webhooks saved."}, nil
}

// splitList reads a comma- or line-separated list; empty means all.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (c *Console) rotateSecret(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	if _, err := c.deps.Webhooks.RotateSecret(r.Context(), q.p().CompanyID); err != nil {
		return outcome{}, err
	}
	return outcome{Notice: "Signing secret rotated: receivers must use the new one now."}, nil
}

// Event types of the editor: the inbound ones an entry gets by default, and
// the status and device events it may opt in to.
var (
	inboundEvents = []string{"sms.received", "whatsapp.received", "imessage.received"}
	statusEvents  = []string{"message.sent", "message.delivered", "message.failed", "message.expired"}
	deviceEvents  = []string{"device.online", "device.offline", "device.battery_low"}
)

// eventsOf is the entry's events list from its boxes: exactly the inbound
// types (the boxes as a new entry shows them) is stored as no list, so the
// entry keeps the default; so is none ticked, which means the same.
func eventsOf(ticked []string) []string {
	if len(ticked) == 0 || slices.Equal(ticked, inboundEvents) {
		return nil
	}
	return ticked
}

// eventTicked says whether an entry's box for event type v is ticked.
func eventTicked(events []string, v string) bool {
	if len(events) == 0 {
		return slices.Contains(inboundEvents, v)
	}
	return slices.Contains(events, v)
}
