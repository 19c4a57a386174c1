package httpapi

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// WhatsApp numbers and iMessage handles, their sends and messages
// (contract sections 8 and 11). The two channels share every handler; ch
// says which, and with it the names of the id fields.

type agentChannel struct {
	name     string // channel.WhatsApp or channel.IMessage
	idField  string // number_id or handle_id
	addr     string // phone or handle
	listName string // numbers or handles
	param    string // the path parameter of one number
}

var (
	waChannel = agentChannel{channel.WhatsApp, "number_id", "phone", "numbers", "number_id"}
	imChannel = agentChannel{channel.IMessage, "handle_id", "handle", "handles", "handle_id"}
)

type capsJSON struct {
	PerMinute int `json:"per_minute"`
	PerHour   int `json:"per_hour"`
	PerDay    int `json:"per_day"`
}

type gapJSON struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

func (s *Server) channels() (*channel.Service, error) {
	if s.deps.Channels == nil {
		return nil, problem.New(problem.NotFound, "WhatsApp and iMessage are not enabled on this server.")
	}
	return s.deps.Channels, nil
}

// numberOut is one number (or handle) of the list: the contract's fields
// plus its warm-up, gap and first sighting. presence is what
// numbersPresence answered for the numbers being answered.
func numberOut(ch agentChannel, n channel.Number, presence map[string]time.Time) map[string]any {
	_, online := presence[n.Device]
	return map[string]any{
		ch.idField:           n.PublicID,
		ch.addr:              n.Address,
		"device_fingerprint": n.Device,
		"online":             n.DeviceID != 0 && online,
		"status":             n.Status,
		"caps":               capsJSON{n.Caps.PerMinute, n.Caps.PerHour, n.Caps.PerDay},
		"sent_today":         n.SentToday,
		"warmup":             n.Warmup,
		"gap_seconds":        gapJSON{n.Gap.Min.Seconds(), n.Gap.Max.Seconds()},
		"first_seen_at":      ts(n.FirstSeen),
	}
}

// numbersPresence asks the hub once which of the numbers' devices are
// online: on a cluster one query for the devices linked on other nodes, not
// one per number.
func (s *Server) numbersPresence(list ...channel.Number) map[string]time.Time {
	return s.deps.Phones.Presence(channel.Devices(list...))
}

func (s *Server) listNumbers(ch agentChannel) echo.HandlerFunc {
	return func(c echo.Context) error {
		svc, err := s.channels()
		if err != nil {
			return err
		}
		out, err := s.numbersList(c.Request().Context(), svc, principal(c).CompanyID, ch)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{ch.listName: out})
	}
}

// numbersList is the company's numbers (or handles) of the channel as
// GET /whatsapp/numbers and GET /imessage/handles list them, in the
// store's order; the MCP tool list_numbers answers the same list.
func (s *Server) numbersList(ctx context.Context, svc *channel.Service, companyID uint64, ch agentChannel) ([]map[string]any, error) {
	list, err := svc.Numbers(ctx, companyID, ch.name)
	if err != nil {
		return nil, err
	}
	presence := s.numbersPresence(list...)
	out := make([]map[string]any, 0, len(list))
	for _, n := range list {
		out = append(out, numberOut(ch, n, presence))
	}
	return out, nil
}

func (s *Server) patchNumber(ch agentChannel) echo.HandlerFunc {
	return func(c echo.Context) error {
		svc, err := s.channels()
		if err != nil {
			return err
		}
		var in numberPatchBody
		if err := bind(c, &in); err != nil {
			return err
		}
		p, err := in.patch()
		if err != nil {
			return err
		}
		n, err := svc.Update(c.Request().Context(), principal(c).CompanyID, ch.name, c.Param(ch.param), p)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, numberOut(ch, n, s.numbersPresence(n)))
	}
}

// numberPatchBody is the body of PATCH /whatsapp/numbers/{number_id} and
// PATCH /imessage/handles/{handle_id}; each field tells absent from null
// (field). The number's own caps and gap are cleared by null, each cap or
// the whole object, back to the server's defaults (0, and 0 to 0 seconds);
// status cannot be (400), nor one end of a gap (required).
type numberPatchBody struct {
	Status field[string] `json:"status"`
	Caps   field[struct {
		PerMinute field[int] `json:"per_minute"`
		PerHour   field[int] `json:"per_hour"`
		PerDay    field[int] `json:"per_day"`
	}] `json:"caps"`
	Gap field[struct {
		Min *float64 `json:"min"`
		Max *float64 `json:"max"`
	}] `json:"gap_seconds"`
}

func (b numberPatchBody) patch() (channel.Patch, error) {
	status, err := b.Status.value("status")
	if err != nil {
		return channel.Patch{}, err
	}
	p := channel.Patch{Status: status}
	var noCap int
	var noGap float64
	switch caps := b.Caps.Value; {
	case b.Caps.Null:
		p.Caps = &channel.CapsPatch{PerMinute: &noCap, PerHour: &noCap, PerDay: &noCap}
	case b.Caps.Set:
		p.Caps = &channel.CapsPatch{PerMinute: caps.PerMinute.clearable(), PerHour: caps.PerHour.clearable(), PerDay: caps.PerDay.clearable()}
	}
	switch {
	case b.Gap.Null:
		p.Gap = &channel.GapPatch{Min: &noGap, Max: &noGap}
	case b.Gap.Set:
		p.Gap = &channel.GapPatch{Min: b.Gap.Value.Min, Max: b.Gap.Value.Max}
	}
	return p, nil
}

type agentSendBody struct {
	NumberID string `json:"number_id"`
	HandleID string `json:"handle_id"`
	To       string `json:"to"`
	Content  string `json:"content"`
	Type     string `json:"type"`
	MediaURL string `json:"media_url"`
}

func (s *Server) agentSend(ch agentChannel) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := s.channels(); err != nil {
			return err
		}
		var in agentSendBody
		if err := bind(c, &in); err != nil {
			return err
		}
		out, err := s.sendAgent(c.Request().Context(), ch, principal(c), in, idempotencyKey(c, in))
		if err != nil {
			return err
		}
		return out.write(c)
	}
}

// sendAgent is the one way a WhatsApp or iMessage send is made, for the
// API's send routes and the MCP tools alike.
func (s *Server) sendAgent(ctx context.Context, ch agentChannel, p account.Principal, in agentSendBody, key store.IdempotencyKey) (sent, error) {
	svc, err := s.channels()
	if err != nil {
		return sent{}, err
	}
	id := in.NumberID
	if ch.name == channel.IMessage {
		id = in.HandleID
	}
	answer := func(m store.Message) (int, []byte) {
		body, _ := json.Marshal(map[string]string{"status": "queued", "id": m.UUID})
		return http.StatusAccepted, body
	}
	m, prior, err := svc.Send(ctx, channel.SendInput{
		CompanyID: p.CompanyID, UserID: p.UserID, Channel: ch.name, NumberID: id, To: in.To, Type: in.Type,
		Content: in.Content, MediaURL: in.MediaURL, IdempotencyKey: key,
	}, answer)
	if err != nil {
		return sent{}, err
	}
	return answered(key, m, prior, answer)
}

// agentMessageOut is one WhatsApp or iMessage message: the contract's
// fields, plus direction and from (the number for a send, the sender for
// an inbound message; to is then the number that received it).
func agentMessageOut(ch agentChannel, m store.Message) map[string]any {
	out := map[string]any{
		"id":          m.UUID,
		ch.idField:    m.NumberRef,
		"direction":   m.Direction,
		"content":     m.Text,
		"type":        m.ContentType,
		"media_url":   nullable(m.MediaURL),
		"status":      m.Status,
		"error":       nullable(m.Error),
		"detail":      nullable(m.Detail),
		"created_at":  ts(m.CreatedAt),
		"updated_at":  ts(m.UpdatedAt),
		"from":        m.Account,
		"to":          m.Phone,
		"received_at": nullable(m.ReceivedAt),
	}
	if m.Direction == store.Inbound {
		out["from"], out["to"] = m.Phone, m.Account
		files := make([]mediaJSON, 0, len(m.Media))
		for _, f := range m.Media {
			files = append(files, mediaJSON{ID: f.ID, ContentType: f.ContentType, Size: f.Size, Filename: f.Filename})
		}
		out["media"] = files // GET /media/{id} serves each
	}
	return out
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Server) agentMessages(ch agentChannel) echo.HandlerFunc {
	return func(c echo.Context) error {
		svc, err := s.channels()
		if err != nil {
			return err
		}
		page, err := queryRange(c, "page", 1, 1, math.MaxInt)
		if err != nil {
			return err
		}
		limit, err := queryRange(c, "limit", channel.DefaultPageLimit, 1, channel.MaxPageLimit)
		if err != nil {
			return err
		}
		release, err := s.takeRead(c)
		if err != nil {
			return err
		}
		defer release()
		pg, err := svc.Messages(c.Request().Context(), principal(c).CompanyID, ch.name, c.QueryParam(ch.idField), page, limit)
		if err != nil {
			return err
		}
		return writeAgentMessages(c, ch, pg)
	}
}

// writeAgentMessages answers a page of /whatsapp/messages or
// /imessage/messages, an item at a time: {"messages": [...], "page",
// "pages", "total"}.
func writeAgentMessages(c echo.Context, ch agentChannel, pg channel.Page) error {
	return writeList(c, `{"messages":[`, pg.Messages, func(m store.Message) map[string]any { return agentMessageOut(ch, m) },
		pageEnd(pg.Page, pg.Pages, pg.Total))
}

func (s *Server) agentMessage(ch agentChannel) echo.HandlerFunc {
	return func(c echo.Context) error {
		svc, err := s.channels()
		if err != nil {
			return err
		}
		m, err := svc.Message(c.Request().Context(), principal(c).CompanyID, ch.name, c.Param("id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, agentMessageOut(ch, m))
	}
}
