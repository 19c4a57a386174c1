package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/internal/bidi"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// numberMessagesShown is how many of a number's messages its page shows:
// the newest.
const numberMessagesShown = 50

// The WhatsApp numbers and iMessage handles page. Every action is a
// member's, as on the API (PATCH /whatsapp/numbers/{id} is not admin-only),
// and goes through channel.Service, so caps, pauses and validation are the
// API's own.
func (c *Console) numberRoutes(mux *http.ServeMux) {
	base := Prefix + "/numbers"
	mux.HandleFunc("GET "+base, c.page(member, c.numbersPage))
	mux.HandleFunc("GET "+base+"/{channel}/{id}", c.page(member, c.numberPage))
	mux.HandleFunc("GET "+base+"/{channel}/{id}/messages", c.page(member, c.numberMessagesJSON))
	mux.HandleFunc("POST "+base+"/{channel}/{id}/status", c.actionAt(member, numberBack, c.setNumberStatus))
	mux.HandleFunc("POST "+base+"/{channel}/{id}/pacing", c.actionAt(member, numberBack, c.setNumberPacing))
	mux.HandleFunc("POST "+base+"/{channel}/{id}/send", c.actionAt(member, numberBack, c.sendAgent))
}

// numberBack is the page a plain post of a number's forms comes back to
// with its error: the number's own, where the fields it names are (the
// list has none of them); the list for an address that names no channel.
func numberBack(r *http.Request) string {
	if ch, err := channelOf(r); err == nil {
		return Prefix + "/numbers/" + ch + "/" + url.PathEscape(r.PathValue("id"))
	}
	return Prefix + "/numbers"
}

// numberRow is a number or handle as the pages draw it.
type numberRow struct {
	channel.Number
	Channel, Noun, Path string
	// IDField is the send's field naming the number: number_id or handle_id.
	IDField string
	Online  bool
	// DeviceName is the agent's name (its fingerprint when unknown).
	DeviceName string
}

type numbersData struct {
	WhatsApp, IMessage []numberRow
	// LiveSince is the live view's mark, taken before the numbers and
	// their agents' links were read (Broker.Mark): its stream says
	// whether to reload the badges.
	LiveSince string
}

type numberData struct {
	N        numberRow
	Messages []liveMessage
	Types    []string
	// LiveSince is the live view's mark, taken before the messages were
	// read (Broker.Mark): its stream says whether to reload them.
	LiveSince string
}

func nounOf(ch string) string {
	if ch == channel.IMessage {
		return "iMessage handle"
	}
	return "WhatsApp number"
}

var errNoChannel = problem.New(problem.NotFound, "There is no such page.")

// channelOf reads the channel of the address; anything else is not found.
func channelOf(r *http.Request) (string, error) {
	switch ch := r.PathValue("channel"); ch {
	case channel.WhatsApp, channel.IMessage:
		return ch, nil
	}
	return "", errNoChannel
}

// rowOf draws n; names are the company's devices' names and presence
// what numbersPresence answered.
func rowOf(n channel.Number, names map[string]string, presence map[string]time.Time) numberRow {
	row := numberRow{Number: n, Channel: n.Channel, Noun: nounOf(n.Channel), DeviceName: n.Device, IDField: "number_id",
		Path: numberPath(n)}
	if n.Channel == channel.IMessage {
		row.IDField = "handle_id"
	}
	if name := names[n.Device]; name != "" {
		row.DeviceName = name
	}
	_, online := presence[n.Device]
	row.Online = n.DeviceID != 0 && online
	return row
}

// numberPath is the console page of n.
func numberPath(n channel.Number) string { return Prefix + "/numbers/" + n.Channel + "/" + n.PublicID }

// numbersPresence asks the hub once which of the numbers' devices are
// online: on a cluster one query for the devices linked on other nodes, not
// one per number.
func (c *Console) numbersPresence(list ...channel.Number) map[string]time.Time {
	if c.deps.Phones == nil {
		return nil
	}
	return c.deps.Phones.Presence(channel.Devices(list...))
}

func (c *Console) deviceNames(r *http.Request, companyID uint64) (map[string]string, error) {
	devs, err := c.deps.Devices.List(r.Context(), companyID)
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(devs))
	for _, d := range devs {
		names[d.Fingerprint] = d.Name
	}
	return names, nil
}

func (c *Console) numbersPage(w http.ResponseWriter, r *http.Request, q *req) error {
	since := c.deps.Broker.Mark()
	company := q.p().CompanyID
	names, err := c.deviceNames(r, company)
	if err != nil {
		return err
	}
	data := numbersData{LiveSince: since}
	lists := map[string][]channel.Number{}
	var all []channel.Number
	for _, ch := range []string{channel.WhatsApp, channel.IMessage} {
		list, err := c.deps.Channels.Numbers(r.Context(), company, ch)
		if err != nil {
			return err
		}
		lists[ch] = list
		all = append(all, list...)
	}
	presence := c.numbersPresence(all...)
	for ch, dst := range map[string]*[]numberRow{channel.WhatsApp: &data.WhatsApp, channel.IMessage: &data.IMessage} {
		for _, n := range lists[ch] {
			*dst = append(*dst, rowOf(n, names, presence))
		}
	}
	c.render(w, r, http.StatusOK, "numbers", c.viewFor(q, numbersTitle, data))
	return nil
}

// numbersTitle is the page's title and its label in the navigation.
const numbersTitle = "WhatsApp & iMessage"

// number reads the number (or handle) the address names: another
// company's, or an unknown one, is not found.
func (c *Console) number(r *http.Request, q *req) (channel.Number, error) {
	ch, err := channelOf(r)
	if err != nil {
		return channel.Number{}, err
	}
	return c.deps.Channels.Number(r.Context(), q.p().CompanyID, ch, r.PathValue("id"))
}

func (c *Console) numberPage(w http.ResponseWriter, r *http.Request, q *req) error {
	since := c.deps.Broker.Mark()
	n, err := c.number(r, q)
	if err != nil {
		return err
	}
	names, err := c.deviceNames(r, q.p().CompanyID)
	if err != nil {
		return err
	}
	msgs, err := c.numberMessages(r, q, n)
	if err != nil {
		return err
	}
	data := numberData{N: rowOf(n, names, c.numbersPresence(n)), Messages: msgs, Types: []string{"text", "image", "video", "audio", "document"}, LiveSince: since}
	c.render(w, r, http.StatusOK, "number", c.viewFor(q, numbersTitle, data))
	return nil
}

// numberMessages are the number's newest messages, newest first.
func (c *Console) numberMessages(r *http.Request, q *req, n channel.Number) ([]liveMessage, error) {
	page, err := c.deps.Channels.Messages(r.Context(), q.p().CompanyID, n.Channel, n.PublicID, 1, numberMessagesShown)
	if err != nil {
		return nil, err
	}
	out := make([]liveMessage, 0, len(page.Messages))
	now := c.deps.Now() // one instant for the whole list
	for _, m := range page.Messages {
		out = append(out, liveOut(m, now))
	}
	return out, nil
}

// numberMessagesJSON reloads the list after the live stream reconnected,
// or opened after a change it never carried, with the agent's badge.
func (c *Console) numberMessagesJSON(w http.ResponseWriter, r *http.Request, q *req) error {
	n, err := c.number(r, q)
	if err == nil {
		var msgs []liveMessage
		if msgs, err = c.numberMessages(r, q, n); err == nil {
			// And its agent's badge, online or not now.
			row := rowOf(n, nil, c.numbersPresence(n))
			writeJSON(w, http.StatusOK, map[string]any{"messages": msgs, "online": row.Online})
			return nil
		}
	}
	c.answerJSON(w, r, err)
	return nil
}

func (c *Console) setNumberStatus(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	ch, err := channelOf(r)
	if err != nil {
		return outcome{}, err
	}
	status := r.PostFormValue("status")
	n, err := c.deps.Channels.Update(r.Context(), q.p().CompanyID, ch, r.PathValue("id"), channel.Patch{Status: &status})
	if err != nil {
		return outcome{}, err
	}
	verb := "resumed"
	if n.Status == store.NumberPaused {
		verb = "paused: sends through it are refused, and those already queued held, until it is resumed"
	}
	return outcome{Redirect: numberPath(n), Notice: bidi.Isolate(numplan.Display(n.Address)) + " " + verb + "."}, nil
}

// setNumberPacing sets the caps and the gap as PATCH does, with the same
// field names, so an error lands beside its input. A blank input is 0: the
// server's default.
func (c *Console) setNumberPacing(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	ch, err := channelOf(r)
	if err != nil {
		return outcome{}, err
	}
	var caps channel.CapsPatch
	// In the form's order, so the first wrong field is the one named.
	for _, f := range []struct {
		name string
		dst  **int
	}{{"caps.per_minute", &caps.PerMinute}, {"caps.per_hour", &caps.PerHour}, {"caps.per_day", &caps.PerDay}} {
		v, err := formInt(r, f.name)
		if err != nil {
			return outcome{}, err
		}
		*f.dst = &v
	}
	var gap channel.GapPatch
	for _, f := range []struct {
		name string
		dst  **float64
	}{{"gap_seconds.min", &gap.Min}, {"gap_seconds.max", &gap.Max}} {
		v, err := formFloat(r, f.name)
		if err != nil {
			return outcome{}, err
		}
		*f.dst = &v
	}
	n, err := c.deps.Channels.Update(r.Context(), q.p().CompanyID, ch, r.PathValue("id"), channel.Patch{Caps: &caps, Gap: &gap})
	if err != nil {
		return outcome{}, err
	}
	return outcome{Redirect: numberPath(n), Notice: "Caps and gap of " + bidi.Isolate(numplan.Display(n.Address)) + " saved."}, nil
}

func formInt(r *http.Request, field string) (int, error) {
	s := strings.TrimSpace(r.PostFormValue(field))
	if s == "" {
		return 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, problem.Invalid(field, "must be a whole number: 0 (the server's default) to 65535")
	}
	return v, nil
}

func formFloat(r *http.Request, field string) (float64, error) {
	s := strings.TrimSpace(r.PostFormValue(field))
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, problem.Invalid(field, "must be a number of seconds, such as 2 or 2.5")
	}
	return v, nil
}

func (c *Console) sendAgent(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	ch, err := channelOf(r)
	if err != nil {
		return outcome{}, err
	}
	f := r.PostFormValue
	typ := f("type")
	media := strings.TrimSpace(f("media_url"))
	if typ == "text" {
		media = "" // the field may hold a URL typed before switching back to text
	}
	m, _, err := c.deps.Channels.Send(r.Context(), channel.SendInput{CompanyID: q.p().CompanyID, UserID: q.p().UserID, Channel: ch,
		NumberID: r.PathValue("id"), To: f("to"), Type: typ, Content: f("content"), MediaURL: media}, nil)
	if pe, ok := problem.As(err); ok && pe.Code == problem.NumberCapped {
		out := *pe
		out.Message = "The " + nounOf(ch) + " is at its send cap; it can send again in " + problem.InWords(time.Duration(pe.RetryAfter)*time.Second) + "."
		w.Header().Set("Retry-After", strconv.Itoa(pe.RetryAfter))
		return outcome{}, &out
	}
	if err != nil {
		return outcome{}, err
	}
	return outcome{Redirect: Prefix + "/numbers/" + ch + "/" + m.NumberRef, Data: liveOut(m, c.deps.Now())}, nil
}
