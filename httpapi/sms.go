package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

type sendBody struct {
	DeviceFingerprint string `json:"device_fingerprint"`
	Pool              string `json:"pool"`
	Phone             string `json:"phone"`
	Message           string `json:"message"`
	SIMSlot           string `json:"sim_slot"`
	SendAt            string `json:"send_at"`
	// Window, ExpiresAt and Validity are when the message may go out and
	// until when (docs/routing.md).
	Window    *windowJSON `json:"window"`
	ExpiresAt string      `json:"expires_at"`
	Validity  *int64      `json:"validity"`
	// Priority orders the device's queue: 0 (default) to 9, higher first.
	Priority int `json:"priority"`
}

type sendJSON struct {
	Message string `json:"message"`
	QueueID string `json:"queueId"`
	// A send through a pool answers where the pool sent it too.
	*routeJSON
}

// routeJSON is what a pool chose for a send: on the answers of sends that
// named a pool only, so a company without pools sees the contract's shapes.
type routeJSON struct {
	Pool              string `json:"pool"`
	DeviceFingerprint string `json:"device_fingerprint"`
	SIMSlot           string `json:"sim_slot"`
}

func routeOf(m store.Message) *routeJSON {
	if m.Pool == "" {
		return nil
	}
	return &routeJSON{Pool: m.Pool, DeviceFingerprint: m.Device, SIMSlot: m.SIMSlot}
}

type aliasSendJSON struct {
	ID                uint64 `json:"id"`
	Message           string `json:"message"`
	Phone             string `json:"phone"`
	DeviceFingerprint string `json:"device_fingerprint"`
	SIMSlot           string `json:"sim_slot"`
	NumberType        string `json:"number_type,omitempty"`
}

func (s *Server) chatSend(c echo.Context) error {
	return s.send(c, chatSendAnswer)
}

// chatSendAnswer is the answer of POST /chat/send and of the MCP tool
// send_sms, which share their idempotency keys and so their answers.
func chatSendAnswer(m store.Message) (int, []byte) {
	word := sendWord(m)
	if m.Pool == "" && plainJSONString(m.UUID) {
		// What json.Marshal writes for sendJSON without a route, written
		// without reflection for every send (TestChatSendAnswer holds
		// the two the same).
		const head, mid, tail = `{"message":"`, `","queueId":"`, `"}`
		b := make([]byte, 0, len(head)+len(word)+len(mid)+len(m.UUID)+len(tail))
		b = append(append(append(append(append(b, head...), word...), mid...), m.UUID...), tail...)
		return http.StatusOK, b
	}
	body, _ := json.Marshal(sendJSON{Message: word, QueueID: m.UUID, routeJSON: routeOf(m)})
	return http.StatusOK, body
}

// plainJSONString reports whether json.Marshal writes s as it is between
// its quotes: printable ASCII that it neither escapes nor HTML-escapes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func (s *Server) automationSend(c echo.Context) error {
	return s.send(c, func(m store.Message) (int, []byte) {
		body, _ := json.Marshal(aliasSendJSON{ID: m.ID, Message: m.Text, Phone: m.Phone, DeviceFingerprint: m.Device, SIMSlot: m.SIMSlot,
			NumberType: numplan.Type(m.Phone)})
		return http.StatusOK, body
	})
}

// send queues an SMS; the answer is built inside the store transaction so an
// Idempotency-Key replays exactly the first answer.
func (s *Server) send(c echo.Context, answer sms.Answer) error {
	var in sendBody
	if err := bind(c, &in); err != nil {
		return err
	}
	// The key's digest from &in: the same JSON as from in (sendBody has no
	// marshaler of its own), without a copy of the body on the heap.
	out, err := s.sendSMS(c.Request().Context(), principal(c), in, idempotencyKey(c, &in), answer)
	if err != nil {
		return err
	}
	return out.write(c)
}

// sent is a send's answer: the first one, or the kept one of a retry.
type sent struct {
	status   int
	body     []byte
	replayed bool
}

func (r sent) write(c echo.Context) error {
	if r.replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	return c.JSONBlob(r.status, r.body)
}

// sendSMS is the one way an SMS send is made, for the API's two send
// routes and the MCP tool alike: answer is the route's answer.
func (s *Server) sendSMS(ctx context.Context, p account.Principal, in sendBody, key store.IdempotencyKey, answer sms.Answer) (sent, error) {
	m, prior, err := s.deps.SMS.Send(ctx, sms.SendInput{
		CompanyID: p.CompanyID, UserID: p.UserID, Device: in.DeviceFingerprint, Pool: in.Pool, Phone: in.Phone,
		Message: in.Message, SIMSlot: in.SIMSlot, SendAt: in.SendAt, IdempotencyKey: key,
		Window: in.Window.window(), ExpiresAt: in.ExpiresAt, Validity: in.Validity, Priority: in.Priority,
	}, answer)
	if err != nil {
		return sent{}, err
	}
	return answered(key, m, prior, answer)
}

type queueJSON struct {
	QueueID   string `json:"queue_id"`
	ID        uint64 `json:"id"`
	Status    string `json:"status"`
	Error     string `json:"error"`
	UpdatedAt string `json:"updated_at"`
	// SendAt is shown for a message sent with send_at only, so a company
	// that never schedules sees the contract's shape unchanged.
	SendAt string `json:"send_at,omitempty"`
	// Window is the message's sending window (the send's or its pool's),
	// and HeldUntil its next opening while the message waits for it; both
	// only for a message with a window.
	Window    *windowJSON `json:"window,omitempty"`
	HeldUntil string      `json:"held_until,omitempty"`
	// Priority is shown for a send made with one above 0.
	Priority int `json:"priority,omitempty"`
	// Where a pool sent the message, for a send through a pool only.
	*routeJSON
	// Attempts are the members a failover moved the message off, oldest
	// first; only for a message that moved.
	Attempts []attemptJSON `json:"attempts,omitempty"`
}

type attemptJSON struct {
	DeviceFingerprint string `json:"device_fingerprint"`
	SIMSlot           string `json:"sim_slot"`
	Reason            string `json:"reason"`
	MovedAt           string `json:"moved_at"`
}

// queueItem is a send's queue item at now.
func queueItem(m store.Message, now time.Time) queueJSON {
	q := queueJSON{QueueID: m.UUID, ID: m.ID, Status: m.Status, Error: m.Error, UpdatedAt: ts(m.UpdatedAt), routeJSON: routeOf(m)}
	if !m.SendAt.IsZero() {
		q.SendAt = ts(m.SendAt)
	}
	q.Window, q.Priority = windowOut(m.Window), m.Priority
	// A link holds a job outside its window only when it comes to read it,
	// so a phone that is offline has not held it yet; the window decides
	// all the same, and the client is told its next opening (WaitsUntil,
	// which the console shows too).
	if until := m.WaitsUntil(now); !until.IsZero() {
		q.HeldUntil = ts(until)
	}
	for _, a := range m.Attempts {
		q.Attempts = append(q.Attempts, attemptJSON{DeviceFingerprint: a.Device, SIMSlot: a.SIMSlot, Reason: a.Reason, MovedAt: ts(a.MovedAt)})
	}
	return q
}

func (s *Server) queueStatus(c echo.Context) error {
	m, err := s.deps.SMS.Queued(c.Request().Context(), principal(c).CompanyID, c.Param("queueId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, queueItem(m, s.deps.Now()))
}

type messageItemJSON struct {
	ID        uint64 `json:"id"`
	Direction string `json:"direction"`
	Message   string `json:"message"`
	Phone     string `json:"phone"`
	SIMSlot   string `json:"sim_slot"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
	QueueID   string `json:"queue_id,omitempty"`
	Error     string `json:"error,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
	Segments  int    `json:"segments"`
	// NumberType is numplan.Type of Phone, where the numbering data knows it.
	NumberType string `json:"number_type,omitempty"`
}

func messageItem(m store.Message) messageItemJSON {
	out := messageItemJSON{ID: m.ID, Direction: m.Direction, Message: m.Text, Phone: m.Phone, SIMSlot: m.SIMSlot,
		Status: m.Status, CreatedAt: ts(m.CreatedAt), Segments: m.Segments, NumberType: numplan.Type(m.Phone)}
	if m.Direction == store.Outbound {
		out.QueueID, out.Error, out.UpdatedAt = m.UUID, m.Error, ts(m.UpdatedAt)
	}
	return out
}

// queryRange reads an optional integer query parameter that takes least
// to most (a page, a limit): def when it is absent or empty. Any other
// value it does not take, out of the range, past the largest integer or no
// whole number at all (0, -1, 99999999999999999999, 1e20, 2.5, abc), is
// refused with the one sentence of its range, the domain's for a value out
// of it ("limit must be from 1 to 100.", "page must be from 1 to
// 9223372036854775807."), so a client is told the range whatever it sent.
func queryRange(c echo.Context, name string, def, least, most int) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least || n > most {
		return 0, problem.OutOfRange(name, least, most)
	}
	return n, nil
}

// queryID reads a record's id from a query parameter's value (webhook_id,
// an item of users), by the rule of a path's id (store.ParseID): decimal
// digits written as the API writes ids, without leading zeros. ok is
// false for anything else, 0, 01, -1, abc, 1e20 alike, which the caller
// answers 400 naming the parameter; digits past the largest id are
// store.NoID, an id no record has, which names nothing as an unknown id.
func queryID(v string) (id uint64, ok bool) {
	if v == "" || v[0] == '0' {
		return 0, false
	}
	id, err := strconv.ParseUint(v, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return store.NoID, true
	}
	return id, err == nil
}

// queryPhone reads a phone number from the query string (plusOfSpace);
// the domain then checks it like any phone input, so a number without its
// + is refused rather than matching nothing.
func queryPhone(c echo.Context, name string) string { return plusOfSpace(c.QueryParam(name)) }

// plusOfSpace is a phone number of a query string or a path as the routes
// read it: a + sent unencoded in a query arrives as a space (form
// encoding), so a value whose first character is a space is read with its
// + back. Spaces alone stay as they are: they name no number, and the
// domain answers that one is required.
func plusOfSpace(v string) string {
	if strings.HasPrefix(v, " ") && strings.TrimSpace(v) != "" {
		return "+" + v[1:]
	}
	return v
}

// takeRead takes one of the company's places of list reads
// (ReadsPerCompany), waiting for one at most the configured ReadWait, for
// a read whose answer carries a page of message texts: release gives it
// back once the answer is written.
func (s *Server) takeRead(c echo.Context) (release func(), err error) {
	return s.reads.take(c.Request().Context(), principal(c).CompanyID)
}

func (s *Server) chatMessages(c echo.Context) error {
	page, err := queryRange(c, "page", 1, 1, math.MaxInt)
	if err != nil {
		return err
	}
	limit, err := queryRange(c, "limit", sms.DefaultPageLimit, 1, sms.MaxPageLimit)
	if err != nil {
		return err
	}
	release, err := s.takeRead(c)
	if err != nil {
		return err
	}
	defer release()
	pg, err := s.deps.SMS.History(c.Request().Context(), principal(c).CompanyID, c.QueryParam("device_fingerprint"), queryPhone(c, "phone"), page, limit)
	if err != nil {
		return err
	}
	return writeHistory(c, pg)
}

// writeHistory answers a page of /chat/messages (historyOut), an item at
// a time.
func writeHistory(c echo.Context, pg sms.Page) error {
	return writeList(c, `{"messages":[`, pg.Messages, messageItem, pageEnd(pg.Page, pg.Pages, pg.Total))
}

// pageEnd closes a page of messages: its page, pages and total, after
// the list, in the order c.JSON writes a map's keys.
func pageEnd(page, pages, total int) string {
	return fmt.Sprintf(`],"page":%d,"pages":%d,"total":%d}`, page, pages, total)
}

// historyOut is a page of /chat/messages, as the MCP tool answers it (the
// route writes it an item at a time, writeList).
func historyOut(pg sms.Page) map[string]any {
	items := make([]messageItemJSON, 0, len(pg.Messages))
	for _, m := range pg.Messages {
		items = append(items, messageItem(m))
	}
	return map[string]any{"messages": items, "total": pg.Total, "page": pg.Page, "pages": pg.Pages}
}

type conversationJSON struct {
	Phone         string `json:"phone"`
	LastMessage   string `json:"lastMessage"`
	LastMessageAt string `json:"lastMessageAt"`
	Direction     string `json:"direction"`
	MessageCount  int    `json:"messageCount"`
}

func (s *Server) chatConversations(c echo.Context) error {
	limit, err := queryRange(c, "limit", sms.MaxConversations, 1, sms.MaxConversations)
	if err != nil {
		return err
	}
	release, err := s.takeRead(c)
	if err != nil {
		return err
	}
	defer release()
	convs, err := s.deps.SMS.Conversations(c.Request().Context(), principal(c).CompanyID, c.QueryParam("device_fingerprint"), limit)
	if err != nil {
		return err
	}
	return writeConversations(c, convs)
}

// writeConversations answers /chat/conversations (conversationsOut), an
// item at a time.
func writeConversations(c echo.Context, convs []store.Conversation) error {
	return writeList(c, `{"conversations":[`, convs, conversationOut, `]}`)
}

// conversationsOut is the answer of /chat/conversations, as the MCP tool
// answers it (the route writes it an item at a time, writeList).
func conversationsOut(convs []store.Conversation) map[string]any {
	out := make([]conversationJSON, 0, len(convs))
	for _, cv := range convs {
		out = append(out, conversationOut(cv))
	}
	return map[string]any{"conversations": out}
}

// conversationOut is one conversation of /chat/conversations.
func conversationOut(cv store.Conversation) conversationJSON {
	return conversationJSON{Phone: cv.Phone, LastMessage: cv.LastMessage, LastMessageAt: ts(cv.LastMessageAt), Direction: cv.Direction, MessageCount: cv.MessageCount}
}

// inboundJSON is the spec's Inbound SMS. In the list, id is the integer id
// and uuid the UUID; in the latest-message answer, id is the UUID (as the
// spec shows) and message_id the integer id.
type inboundJSON struct {
	ID                any    `json:"id"`
	UUID              string `json:"uuid,omitempty"`
	MessageID         uint64 `json:"message_id,omitempty"`
	Phone             string `json:"phone"`
	Message           string `json:"message"`
	SIMSlot           string `json:"sim_slot"`
	DeviceFingerprint string `json:"device_fingerprint"`
	ReceivedAt        string `json:"received_at"`
	NumberType        string `json:"number_type,omitempty"`
}

func inboundOut(m store.Message) inboundJSON {
	return inboundJSON{Phone: m.Phone, Message: m.Text, SIMSlot: m.SIMSlot, DeviceFingerprint: m.Device, ReceivedAt: m.ReceivedAt,
		NumberType: numplan.Type(m.Phone)}
}

func (s *Server) inboundList(c echo.Context) error {
	release, err := s.takeRead(c)
	if err != nil {
		return err
	}
	defer release()
	msgs, err := s.deps.SMS.InboundList(c.Request().Context(), principal(c).CompanyID, c.QueryParam("device_fingerprint"), c.QueryParam("sim_slot"), sms.InboundListSize)
	if err != nil {
		return err
	}
	return writeInbound(c, msgs)
}

// writeInbound answers /automation/inbound-sms (inboundItems), an item at
// a time.
func writeInbound(c echo.Context, msgs []store.Message) error {
	return writeList(c, `[`, msgs, inboundItem, `]`)
}

// inboundItems is the list of /automation/inbound-sms, as the MCP tool
// answers it (the route writes it an item at a time, writeList).
func inboundItems(msgs []store.Message) []inboundJSON {
	out := make([]inboundJSON, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, inboundItem(m))
	}
	return out
}

// inboundItem is one message of /automation/inbound-sms: id is the
// integer id, uuid the UUID.
func inboundItem(m store.Message) inboundJSON {
	item := inboundOut(m)
	item.ID, item.UUID = m.ID, m.UUID
	return item
}

func (s *Server) latestInbound(c echo.Context) error {
	msgs, err := s.deps.SMS.InboundList(c.Request().Context(), principal(c).CompanyID, c.QueryParam("device_fingerprint"), c.QueryParam("sim_slot"), 1)
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return problem.New(problem.NotFound, "No inbound message yet.")
	}
	out := inboundOut(msgs[0])
	out.ID, out.MessageID = msgs[0].UUID, msgs[0].ID
	return c.JSON(http.StatusOK, out)
}
