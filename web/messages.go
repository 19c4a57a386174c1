package web

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	androidproto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/window"
)

// threadSize is how many messages of a conversation the page shows: the
// newest, oldest of them at the top.
const threadSize = 100

// convListSize is how many conversations the page lists, the latest
// first; an older one comes back to the top with its next message.
const convListSize = 200

// previewChars is how much of a conversation's last message the list
// shows: the page draws one line of it, and 200 conversations that each
// ended with 10,000 four-byte characters made a page of 4 MB.
const previewChars = 200

// preview is the start of text the conversation list shows: its first
// previewChars characters, then an ellipsis.
func preview(text string) string {
	n := 0
	for i := range text {
		if n == previewChars {
			return text[:i] + "…"
		}
		n++
	}
	return text
}

func (c *Console) messageRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"/messages", c.page(member, c.messagesPage))
	mux.HandleFunc("GET "+Prefix+"/messages/thread", c.page(member, c.threadJSON))
	mux.HandleFunc("POST "+Prefix+"/messages/send", c.actionAt(member, sendBack, c.sendSMS))
	mux.HandleFunc("POST "+Prefix+"/messages/cancel", c.action(member, Prefix+"/messages", c.cancelSMS))
}

// fingerprintForm is a device fingerprint as a phone may register it
// (PROTOCOL.md 4.6).
var fingerprintForm = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// sendBack is the page a plain post of the send box comes back to with its
// error: the thread of the device it was sent from (the page's first
// device is another one's), whose send box has the fields the error names.
// The conversation is the page's own: the number typed may be the error.
func sendBack(r *http.Request) string {
	if fp := r.PostForm.Get("device_fingerprint"); fingerprintForm.MatchString(fp) {
		return withQuery(Prefix+"/messages", "device", fp)
	}
	return Prefix + "/messages"
}

type messagesData struct {
	Devices []deviceRow
	Device  *deviceRow
	Convs   []convRow
	More    bool // the list holds convListSize and older ones are not listed
	Phone   string
	Thread  []liveMessage
	SIMs    []string
	// LiveSince is the live view's mark, taken before anything was read
	// (Broker.Mark): its stream says whether to reload the thread.
	LiveSince string
}

type convRow struct {
	Phone, Last, Direction string
	Count                  int
	Current                bool
}

func (c *Console) messagesPage(w http.ResponseWriter, r *http.Request, q *req) error {
	since := c.deps.Broker.Mark()
	rows, err := c.deviceRows(r, q.p().CompanyID, false) // no queue depths shown
	if err != nil {
		return err
	}
	data := messagesData{Devices: rows, Phone: query(r).Get("phone"), LiveSince: since}
	fp := query(r).Get("device")
	if fp == "" && len(rows) > 0 {
		fp = rows[0].Fingerprint
	}
	for i := range rows {
		if rows[i].Fingerprint == fp {
			data.Device = &rows[i]
		}
	}
	if fp != "" && data.Device == nil {
		// Another company's device, or one that is gone: no such page.
		return errNoDevice
	}
	if data.Device != nil {
		convs, err := c.deps.SMS.Conversations(r.Context(), q.p().CompanyID, fp, convListSize)
		if err != nil {
			return err
		}
		if data.Phone == "" && len(convs) > 0 {
			data.Phone = convs[0].Phone
		}
		for _, cv := range convs {
			data.Convs = append(data.Convs, convRow{Phone: cv.Phone, Last: preview(cv.LastMessage), Direction: cv.Direction, Count: cv.MessageCount, Current: cv.Phone == data.Phone})
		}
		data.More = moreConvs(convs)
		if data.Phone != "" {
			if data.Thread, err = c.thread(r, q, fp, data.Phone); err != nil {
				return err
			}
		}
		data.SIMs = simChoices(*data.Device)
	}
	c.render(w, r, http.StatusOK, "messages", c.viewFor(q, "Messages", data))
	return nil
}

// simChoices are the slots a send may name: the selected one, or both.
func simChoices(d deviceRow) []string {
	if androidproto.IsSIMSlot(d.SelectedSIM) {
		return []string{d.SelectedSIM}
	}
	s := androidproto.SIMSlots()
	return s[:]
}

func (c *Console) thread(r *http.Request, q *req, fp, phone string) ([]liveMessage, error) {
	page, err := c.deps.SMS.History(r.Context(), q.p().CompanyID, fp, phone, 1, threadSize)
	if err != nil {
		return nil, err
	}
	out := make([]liveMessage, 0, len(page.Messages))
	now := c.deps.Now()
	for _, m := range page.Messages {
		out = append(out, liveOut(m, now))
	}
	slices.Reverse(out) // newest at the bottom, as people read a conversation
	return out, nil
}

// threadJSON reloads what the messages page shows of a device after the
// live stream reconnected, or opened after a change it never carried: the
// open thread (none without a phone), the conversation list as the page
// draws it, and which of the company's devices are online (the device
// list's badges). One request, as the page's reload was.
func (c *Console) threadJSON(w http.ResponseWriter, r *http.Request, q *req) error {
	fp, phone := query(r).Get("device"), query(r).Get("phone")
	out := threadAnswer{Messages: []liveMessage{}, Convs: []liveConv{}}
	var err error
	if phone != "" {
		out.Messages, err = c.thread(r, q, fp, phone)
	}
	if err == nil {
		out.Convs, out.More, err = c.convs(r, q, fp)
	}
	if err == nil {
		out.Online, err = c.devicesOnline(r, q.p().CompanyID)
	}
	if err != nil {
		c.answerJSON(w, r, err)
		return nil
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// threadAnswer is threadJSON's answer.
type threadAnswer struct {
	Messages []liveMessage `json:"messages"`
	Convs    []liveConv    `json:"convs"`
	// More: older conversations are not listed (messagesData.More).
	More bool `json:"more"`
	// Online: each of the company's devices, by fingerprint, online or not.
	Online map[string]bool `json:"online"`
}

// liveConv is a conversation of the list as the page's script draws it.
type liveConv struct {
	Phone string `json:"phone"`
	// PhoneDisplay is Phone formatted for reading (numplan.Display).
	PhoneDisplay string `json:"phone_display"`
	Last         string `json:"last"`
}

// convs is the device's conversation list as the page draws it, and
// whether older ones are left out.
func (c *Console) convs(r *http.Request, q *req, fp string) ([]liveConv, bool, error) {
	list, err := c.deps.SMS.Conversations(r.Context(), q.p().CompanyID, fp, convListSize)
	if err != nil {
		return nil, false, err
	}
	out := make([]liveConv, 0, len(list))
	for _, cv := range list {
		out = append(out, liveConv{Phone: cv.Phone, PhoneDisplay: numplan.Display(cv.Phone), Last: preview(cv.LastMessage)})
	}
	return out, moreConvs(list), nil
}

// moreConvs says whether older conversations than list are left out: the
// list is the latest convListSize, or fewer where the store ended it at
// store.ConversationsText of last messages.
func moreConvs(list []store.Conversation) bool {
	text := 0
	for _, cv := range list {
		text += len(cv.LastMessage)
	}
	return len(list) == convListSize || text >= store.ConversationsText
}

// devicesOnline says of each of the company's devices whether it is online
// now, as the pages' badges draw it (deviceRows), in one question to the
// hub.
func (c *Console) devicesOnline(r *http.Request, companyID uint64) (map[string]bool, error) {
	devs, err := c.deps.Devices.List(r.Context(), companyID)
	if err != nil {
		return nil, err
	}
	presence := c.devicesPresence(devs)
	out := make(map[string]bool, len(devs))
	for _, d := range devs {
		_, out[d.Fingerprint] = presence[d.Fingerprint]
	}
	return out, nil
}

func (c *Console) sendSMS(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	f := r.PostFormValue
	m, _, err := c.deps.SMS.Send(r.Context(), sms.SendInput{CompanyID: q.p().CompanyID, UserID: q.p().UserID,
		Device: f("device_fingerprint"), Phone: f("phone"), Message: f("message"), SIMSlot: f("sim_slot"), SendAt: sendAtOf(f("send_at")),
		Window: windowOf(r)}, nil)
	if err != nil {
		return outcome{}, err
	}
	back := withQuery(withQuery(Prefix+"/messages", "device", m.Device), "phone", m.Phone)
	return outcome{Redirect: back, Data: liveOut(m, c.deps.Now())}, nil
}

// sendAtOf reads the send box's "send at": RFC 3339 (the page's script turns
// the person's local date-time into UTC), or a bare date-time input
// (2026-11-24T09:30) taken as UTC when a form is posted without the script.
// Anything else goes to the service as typed, which names send_at in its answer.
func sendAtOf(v string) string {
	v = strings.TrimSpace(v)
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC().Format(time.RFC3339)
		}
	}
	return v
}

// windowOf reads the send box's working hours: none when both times are
// empty (the time zone is filled in by the page's script, so it alone says
// nothing); otherwise the service validates them and names window.* in its
// answer. Unticked days mean every day.
func windowOf(r *http.Request) *window.Window {
	f := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	if f("window_from") == "" && f("window_to") == "" {
		return nil
	}
	return &window.Window{Days: r.PostForm["window_days"], From: f("window_from"), To: f("window_to"), TimeZone: f("window_zone")}
}

// cancelSMS takes back a scheduled or queued message, as DELETE
// /chat/queue/{queueId} does: once a phone has it, the service's 409
// sentence says so.
func (c *Console) cancelSMS(w http.ResponseWriter, r *http.Request, q *req) (outcome, error) {
	m, err := c.deps.SMS.Cancel(r.Context(), q.p().CompanyID, r.PostFormValue("queue_id"))
	if err != nil {
		return outcome{}, err
	}
	back := withQuery(withQuery(Prefix+"/messages", "device", m.Device), "phone", m.Phone)
	return outcome{Redirect: back, Data: liveOut(m, c.deps.Now())}, nil
}
