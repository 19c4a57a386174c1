package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Exporter reads one company's records for GET /company/export, the big ones
// a page per short read transaction (boltstore.Store).
type Exporter interface {
	Company(id uint64) (store.Company, error)
	CompanyUsers(companyID uint64) ([]store.User, error)
	CompanyDevices(companyID uint64) ([]store.Device, error)
	WebhookSet(companyID uint64) (store.WebhookSet, error)
	ConversationsAfter(companyID, deviceID uint64, after string, limit int) ([]store.Conversation, error)
	CompanyMessagesAfter(companyID, after uint64, limit int) ([]store.Message, uint64, bool, error)
	LastMessageID() (uint64, error)
	AgentNumbers(companyID uint64, channel string) ([]store.AgentNumber, error)
	OptOuts(companyID uint64, after string, limit int) ([]store.OptOut, error)
	Pools(companyID uint64) ([]store.Pool, error)
	CompanySIMCaps(companyID uint64) (map[uint64]map[string]store.SIMCaps, error)
}

const (
	// exportPage is how many messages or conversations one read transaction
	// fetches; the page is written out after the transaction has ended.
	exportPage = 500
	// exportRecheck is how many records (opt-outs, conversations and
	// messages, whichever section and device they are of) the export
	// writes between two checks of its credential: a page's worth.
	exportRecheck = exportPage
	// exportChunk is the most one write of the stream sends under one
	// deadline: the write timeout asks the client to keep taking data, not
	// to take a page (megabytes of long messages) within it.
	exportChunk = 16 << 10
	// exportsPerCompany and exportsAtOnce bound the exports streaming at
	// once, for one company and for the server: each holds a 64 KiB buffer
	// and a page of messages for as long as its client keeps it, which
	// ExportConfig bounds, so without a bound here the rate limit alone
	// would let one credential hold a hundred of them a minute.
	exportsPerCompany = 2
	exportsAtOnce     = 16
	// exportFormat names the document's layout, for importers to check.
	exportFormat = "simrelay-company-export/1"
)

// Defaults of ExportConfig.
const (
	// DefaultExportWriteTimeout is how long one write of an export may
	// wait for its client to take it.
	DefaultExportWriteTimeout = time.Minute
	// DefaultExportMinRate is the slowest average, in bytes per second, at
	// which an export's client may take it: 64 KiB/s (512 kbit/s) is a poor
	// mobile link. It also keeps a steady client within the write timeout:
	// a write waits until the client has taken about half of what the
	// server's socket holds, at most 2 MiB under Linux's default 4 MiB cap,
	// which takes 32 s at this rate.
	DefaultExportMinRate = 64 << 10
	// DefaultExportGrace is the time an export may wait on its client
	// beyond what its bytes earn at the minimum rate.
	DefaultExportGrace = time.Minute
)

// ExportConfig bounds what the client of one GET /company/export may cost:
// however it reads, it holds its stream and its slot for a bounded time.
type ExportConfig struct {
	// WriteTimeout is how long one write (at most exportChunk bytes) may
	// wait for the client to take it: a client that stops reading is cut
	// then.
	WriteTimeout time.Duration
	// MinRate (bytes per second) and Grace bound the whole stream: its
	// writes may wait on the client Grace + sent/MinRate in all, so a
	// client that takes each write in time but trickles is cut too.
	MinRate int64
	Grace   time.Duration
}

func (c *ExportConfig) defaults() {
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultExportWriteTimeout
	}
	if c.MinRate <= 0 {
		c.MinRate = DefaultExportMinRate
	}
	if c.Grace <= 0 {
		c.Grace = DefaultExportGrace
	}
}

// exportAPIKeyJSON is the API key's metadata. The key itself is left out: an
// export is data, not a credential, and GET /account/api-key shows the key.
type exportAPIKeyJSON struct {
	CreatedAt string `json:"createdAt"`
}

// exportWebhooksJSON is the webhook set without its signing secret: the secret
// signs live deliveries and GET /webhooks/inbound-sms shows it; a data file
// that travels must not carry it. SigningSecretCreatedAt is null while the
// company has no secret yet, as last_seen_at is before a first link: ""
// is no time, and a reader that parses the field as one failed on it.
type exportWebhooksJSON struct {
	Entries                []webhookJSON `json:"entries"`
	SigningSecretCreatedAt *string       `json:"signingSecretCreatedAt"`
}

// exportDeviceJSON is a device without its token hash, as GET /device/list
// shows it less its live state (online, health, queue_depth, last_failures):
// last_seen_at is null before its first link there too.
type exportDeviceJSON struct {
	deviceJSON
	UserID       uint64    `json:"user_id"`
	FCMToken     string    `json:"fcm_token"`
	SIMs         []simJSON `json:"sims"`
	AppVersion   string    `json:"app_version"`
	CreatedAt    string    `json:"created_at"`
	LastSeenAt   *string   `json:"last_seen_at"`
	SMSPerMinute int       `json:"sms_per_minute"`
}

type exportConversationJSON struct {
	DeviceFingerprint string `json:"device_fingerprint"`
	conversationJSON
}

// exportMessageJSON is a message either way, with every stored field a client
// could want back (none of them a secret).
type exportMessageJSON struct {
	ID                uint64 `json:"id"`
	UUID              string `json:"uuid"`
	Direction         string `json:"direction"`
	Channel           string `json:"channel"`
	DeviceFingerprint string `json:"device_fingerprint"`
	Phone             string `json:"phone"`
	Message           string `json:"message"`
	SIMSlot           string `json:"sim_slot"`
	Status            string `json:"status"`
	Error             string `json:"error,omitempty"`
	Segments          int    `json:"segments"`
	UserID            uint64 `json:"user_id,omitempty"`
	ReceivedAt        string `json:"received_at,omitempty"`
	CreatedAt         string `json:"created_at"`
	UpdatedAt         string `json:"updated_at"`
	// Present only on what uses them: a scheduled SMS, and WhatsApp and
	// iMessage messages (their number or handle, content and receipts).
	SendAt      string `json:"send_at,omitempty"`
	NumberID    string `json:"number_id,omitempty"`
	Account     string `json:"account,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	MediaURL    string `json:"media_url,omitempty"`
	Detail      string `json:"detail,omitempty"`
	// Media lists a received message's files (GET /media/{id} reads each);
	// the bytes are not in the export.
	Media []mediaJSON `json:"media,omitempty"`
}

func exportMessage(m store.Message) exportMessageJSON {
	e := exportMessageJSON{ID: m.ID, UUID: m.UUID, Direction: m.Direction, Channel: m.Channel, DeviceFingerprint: m.Device,
		Phone: m.Phone, Message: m.Text, SIMSlot: m.SIMSlot, Status: m.Status, Error: m.Error, Segments: m.Segments,
		UserID: m.UserID, ReceivedAt: m.ReceivedAt, CreatedAt: ts(m.CreatedAt), UpdatedAt: ts(m.UpdatedAt),
		NumberID: m.NumberRef, Account: m.Account, ContentType: m.ContentType, MediaURL: m.MediaURL, Detail: m.Detail}
	if !m.SendAt.IsZero() {
		e.SendAt = ts(m.SendAt)
	}
	for _, f := range m.Media {
		e.Media = append(e.Media, mediaJSON{ID: f.ID, ContentType: f.ContentType, Size: f.Size, Filename: f.Filename})
	}
	return e
}

// exportNumberJSON is a WhatsApp number or iMessage handle with its settings.
type exportNumberJSON struct {
	ID                string   `json:"id"`
	Address           string   `json:"address"`
	DeviceFingerprint string   `json:"device_fingerprint"`
	Status            string   `json:"status"`
	Caps              capsJSON `json:"caps"`
	GapSeconds        *gapJSON `json:"gap_seconds"`
	FirstSeenAt       string   `json:"first_seen_at"`
}

func exportNumbers(ns []store.AgentNumber) []exportNumberJSON {
	out := make([]exportNumberJSON, 0, len(ns))
	for _, n := range ns {
		e := exportNumberJSON{ID: n.PublicID, Address: n.Address, DeviceFingerprint: n.Device, Status: n.Status,
			Caps: capsJSON{n.Caps.PerMinute, n.Caps.PerHour, n.Caps.PerDay}, FirstSeenAt: ts(n.FirstSeen)}
		if n.GapMax > 0 {
			e.GapSeconds = &gapJSON{n.GapMin.Seconds(), n.GapMax.Seconds()}
		}
		out = append(out, e)
	}
	return out
}

type exportOptOutJSON struct {
	Phone     string `json:"phone"`
	Source    string `json:"source"`
	CreatedAt string `json:"created_at"`
}

// companyExport streams the caller's company as one JSON document: its
// profile, users, devices, webhook entries, conversations and messages. It
// holds only the company's own data: no password or token hashes, no API key,
// no signing secret, nothing of the server's (its keys live elsewhere in the
// store and no page here reads them). The small parts are read before the
// status is sent, so their failures answer a proper error; conversations and
// messages follow page by page, each page read in its own short transaction and
// written after it, so a slow client never holds the store.
func (s *Server) companyExport(c echo.Context) error {
	cid := principal(c).CompanyID
	// The slot is taken first: an export refused for it reads nothing, and
	// its refusal is an error body before the document's headers are set
	// (a Content-Disposition would have a browser save it as the export's
	// file). HEAD sends no document and takes none.
	head := c.Request().Method == http.MethodHead
	if !head {
		if err := s.startExport(cid); err != nil {
			return err
		}
		defer s.endExport(cid)
	}
	st := s.deps.Store
	co, err := st.Company(cid)
	if err != nil {
		return err
	}
	users, err := st.CompanyUsers(cid)
	if err != nil {
		return err
	}
	devices, err := st.CompanyDevices(cid)
	if err != nil {
		return err
	}
	set, err := st.WebhookSet(cid)
	if err != nil {
		return err
	}
	waNumbers, err := st.AgentNumbers(cid, store.ChannelNameWhatsApp)
	if err != nil {
		return err
	}
	imHandles, err := st.AgentNumbers(cid, store.ChannelNameIMessage)
	if err != nil {
		return err
	}
	// The messages are those stored when the export began: a company that
	// stores messages faster than its client reads still has an end.
	lastID, err := st.LastMessageID()
	if err != nil {
		return err
	}
	settings, err := s.readExportSettings(cid, devices)
	if err != nil {
		return err
	}

	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	h.Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="simrelay-company-%d-%s.json"`, cid, s.deps.Now().UTC().Format("20060102-150405")))
	h.Set("Cache-Control", "no-store")
	if head {
		return c.NoContent(http.StatusOK)
	}
	c.Response().WriteHeader(http.StatusOK)
	out := &exportConn{w: c.Response(), rc: http.NewResponseController(c.Response()), cfg: s.cfg.Export, left: s.cfg.Export.Grace}
	w := &exportWriter{out: out, buf: bufio.NewWriterSize(out, 64<<10)}
	// The credential is checked again as the records are written, with
	// the route's own check (credentialCheck.still): a document a slow
	// client takes for hours must not go on once its key is rotated or its
	// user removed, demoted or signed out everywhere, any more than another
	// request of it would. An access token's expiry (15 minutes) revokes
	// nothing: the document it was let in for streams on.
	if k, ok := c.Get(keyRecheck).(*credentialCheck); ok {
		w.still = k.still
	}

	w.raw(`{"format":`)
	w.value(exportFormat)
	w.raw(`,"exportedAt":`)
	w.value(ts(s.deps.Now()))
	w.raw(`,"company":`)
	w.value(companyOut(co))
	w.raw(`,"apiKey":`)
	w.value(exportAPIKeyJSON{CreatedAt: ts(co.APIKeyCreatedAt)})
	w.raw(`,"users":`)
	uo := make([]userJSON, 0, len(users))
	for _, u := range users {
		uo = append(uo, userOut(u))
	}
	w.value(uo)
	w.raw(`,"devices":`)
	do := make([]exportDeviceJSON, 0, len(devices))
	for _, d := range devices {
		do = append(do, exportDevice(d))
	}
	w.value(do)
	w.raw(`,"webhooks":`)
	wh := exportWebhooksJSON{Entries: webhooksOut(set.Entries)}
	if !set.SecretCreatedAt.IsZero() {
		made := ts(set.SecretCreatedAt)
		wh.SigningSecretCreatedAt = &made
	}
	w.value(wh)
	// What only a company that used these features has: absent otherwise.
	if len(waNumbers) > 0 {
		w.raw(`,"whatsapp_numbers":`)
		w.value(exportNumbers(waNumbers))
	}
	if len(imHandles) > 0 {
		w.raw(`,"imessage_handles":`)
		w.value(exportNumbers(imHandles))
	}
	settings.write(w)
	s.exportOptOuts(w, cid)

	s.exportConversations(w, cid, devices)
	s.exportMessages(w, cid, lastID)
	w.raw("}\n")
	w.flush()
	if w.err != nil {
		// The status is gone: the connection is closed before the body's
		// end, so that the client sees its transfer fail (curl exits 18)
		// rather than a document cut short; the log tells the operator.
		s.deps.Logger.Warn("company export cut", "company_id", cid, "err", w.err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// exportDevice is a device as the export lists it.
func exportDevice(d store.Device) exportDeviceJSON {
	e := exportDeviceJSON{deviceJSON: deviceOut(d), UserID: d.UserID, FCMToken: d.FCMToken, SIMs: make([]simJSON, 0, len(d.SIMs)),
		AppVersion: d.AppVersion, CreatedAt: ts(d.CreatedAt), SMSPerMinute: d.SMSPerMinute}
	if !d.LastSeenAt.IsZero() {
		seen := ts(d.LastSeenAt)
		e.LastSeenAt = &seen
	}
	for _, sim := range d.SIMs {
		e.SIMs = append(e.SIMs, simJSON(sim))
	}
	return e
}

// exportConversations writes "conversations": each device's, device by
// device, page by page.
func (s *Server) exportConversations(w *exportWriter, cid uint64, devices []store.Device) {
	w.raw(`,"conversations":[`)
	first := true
	for _, d := range devices {
		after, limit := "", exportPage
		for w.ok() {
			page, err := s.deps.Store.ConversationsAfter(cid, d.ID, after, limit)
			if err != nil {
				w.err = err
				break
			}
			for _, cv := range page {
				w.item(&first, exportConversationJSON{DeviceFingerprint: d.Fingerprint, conversationJSON: conversationJSON{Phone: cv.Phone,
					LastMessage: cv.LastMessage, LastMessageAt: ts(cv.LastMessageAt), Direction: cv.Direction, MessageCount: cv.MessageCount}})
			}
			w.flush()
			if !store.ExportPageFull(page, limit) {
				break
			}
			after, limit = page[len(page)-1].Phone, exportNextLimit(limit, len(page))
		}
	}
	w.raw("]")
}

// exportMessages writes "messages": the company's, oldest first, page by
// page, up to lastID, the last message stored when the export began.
func (s *Server) exportMessages(w *exportWriter, cid, lastID uint64) {
	w.raw(`,"messages":[`)
	first := true
	var next uint64
	limit := exportPage
	for w.ok() {
		page, n, done, err := s.deps.Store.CompanyMessagesAfter(cid, next, limit)
		if err != nil {
			w.err = err
			break
		}
		for _, m := range page {
			if m.ID > lastID {
				done = true
				break
			}
			w.item(&first, exportMessage(m))
		}
		if len(page) > 0 {
			w.flush()
		}
		if done || n >= lastID {
			break
		}
		next, limit = n, exportNextLimit(limit, len(page))
	}
	w.raw("]")
}

// exportNextLimit is the limit of the page after one of got records read
// with limit. A page the store ended short of its limit, at
// store.ExportPageText, had long texts, so the next asks for twice as many
// as it got: PostgreSQL reads every row up to the limit to find where the
// text ends (a thousand messages of 40 KB exported in 40 pages of 500 rows
// read 800 MB), and a page of long texts is a few dozen rows. A full page
// doubles the limit again, up to exportPage.
func exportNextLimit(limit, got int) int {
	if got < limit {
		return min(exportPage, max(2*got, 16))
	}
	return min(exportPage, 2*limit)
}

// exportOptOuts writes the company's opt-out list page by page, as
// "opt_outs", when it has one.
func (s *Server) exportOptOuts(w *exportWriter, cid uint64) {
	first, after := true, ""
	for w.ok() {
		page, err := s.deps.Store.OptOuts(cid, after, exportPage)
		if err != nil {
			w.err = err
			return
		}
		if first && len(page) == 0 {
			return
		}
		if first {
			w.raw(`,"opt_outs":[`)
		}
		for _, o := range page {
			w.item(&first, exportOptOutJSON{Phone: o.Phone, Source: o.Source, CreatedAt: ts(o.CreatedAt)})
		}
		w.flush()
		if len(page) < exportPage {
			break
		}
		after = page[len(page)-1].Phone
	}
	w.raw("]")
}

// exportWriter writes the document and remembers the first error, after which
// it writes nothing more.
type exportWriter struct {
	out *exportConn
	buf *bufio.Writer
	err error
	// still checks the request's credential again (the route's own
	// check, credentialCheck.still); nil where there is none to check.
	still func() error
	// records counts the records written (item), the credential being
	// checked before the first and each exportRecheck-th after it.
	records int
}

// ok says whether the next page is to be read: nothing failed yet (a
// credential that item found to no longer hold the route's rights is a
// failure).
func (w *exportWriter) ok() bool { return w.err == nil }

func (w *exportWriter) raw(s string) {
	if w.err == nil {
		_, w.err = w.buf.WriteString(s)
	}
}

func (w *exportWriter) value(v any) {
	if w.err != nil {
		return
	}
	raw, err := json.Marshal(v)
	if err != nil {
		w.err = err
		return
	}
	_, w.err = w.buf.Write(raw)
}

// item writes one record of a list. Before the first record of the
// document and again after each exportRecheck records it checks the
// credential again: one that no longer holds the route's rights cuts the
// document there, as a failure does. So at most exportRecheck records are
// written after it ended, however they are spread over the lists and the
// devices, and no check reads the store where nothing is written (a
// company's many devices without a conversation).
func (w *exportWriter) item(first *bool, v any) {
	if w.err == nil && w.still != nil && w.records%exportRecheck == 0 {
		w.err = w.still()
	}
	w.records++
	if !*first {
		w.raw(",")
	}
	*first = false
	w.value(v)
}

// flush sends what is buffered.
func (w *exportWriter) flush() {
	if w.err != nil {
		return
	}
	if w.err = w.buf.Flush(); w.err == nil {
		w.err = w.out.Flush()
	}
}

// errExportTooSlow cuts an export whose client has taken it, on average,
// slower than ExportConfig.MinRate.
var errExportTooSlow = errors.New("the client took the export slower than the minimum rate")

// exportConn is the response as the export writes to it: each write (of at
// most exportChunk bytes) and each flush goes out under a deadline of its
// own, the write timeout or, when less, what is left of the time the
// stream may wait on its client in all (left). That starts at the grace,
// grows by each byte sent at the minimum rate and shrinks by each write's
// wait: a client that stops reading is cut after the write timeout, one
// that trickles once it has had the grace plus its bytes' worth, so either
// gives its slot back; one that keeps up with the minimum rate never runs
// out. Only waits on the client count, not the store's reads between them.
type exportConn struct {
	w    io.Writer
	rc   *http.ResponseController
	cfg  ExportConfig
	left time.Duration
}

func (o *exportConn) Write(b []byte) (int, error) {
	sent := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), exportChunk)]
		n, err := o.wait(func() (int, error) { return o.w.Write(chunk) })
		sent += n
		b = b[n:]
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// Flush sends what the response itself still buffers.
func (o *exportConn) Flush() error {
	_, err := o.wait(func() (int, error) { return 0, o.rc.Flush() })
	return err
}

// wait runs one write under its deadline and settles the stream's time.
func (o *exportConn) wait(write func() (int, error)) (int, error) {
	if o.left <= 0 {
		return 0, errExportTooSlow
	}
	start := time.Now()
	// A response that takes no deadline would leave the stream unbounded:
	// it is cut instead.
	if err := o.rc.SetWriteDeadline(start.Add(min(o.cfg.WriteTimeout, o.left))); err != nil {
		return 0, fmt.Errorf("export write deadline: %w", err)
	}
	n, err := write()
	o.left += time.Duration(float64(n)/float64(o.cfg.MinRate)*float64(time.Second)) - time.Since(start)
	return n, err
}

// startExport takes a slot for one of the company's exports, or answers 429
// when the company or the server has as many running as it may.
func (s *Server) startExport(cid uint64) error {
	s.exportsMu.Lock()
	defer s.exportsMu.Unlock()
	switch {
	case s.exports[cid] >= exportsPerCompany:
		return &problem.Error{Code: problem.RateLimited, RetryAfter: 60,
			Message: "Your company's exports already running are as many as may run at once; try again when one has finished."}
	case s.exportsTotal >= exportsAtOnce:
		return &problem.Error{Code: problem.RateLimited, RetryAfter: 60,
			Message: "The server is busy with other exports; try again in a minute."}
	}
	s.exports[cid]++
	s.exportsTotal++
	return nil
}

// endExport gives the slot of startExport back.
func (s *Server) endExport(cid uint64) {
	s.exportsMu.Lock()
	defer s.exportsMu.Unlock()
	if s.exports[cid]--; s.exports[cid] <= 0 {
		delete(s.exports, cid)
	}
	s.exportsTotal--
}
