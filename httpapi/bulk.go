package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// Scheduled, cancelled and bulk sends.

type bulkBody struct {
	DeviceFingerprint string      `json:"device_fingerprint"`
	Pool              string      `json:"pool"`
	SIMSlot           string      `json:"sim_slot"`
	SendAt            string      `json:"send_at"`
	Window            *windowJSON `json:"window"`
	ExpiresAt         string      `json:"expires_at"`
	Validity          *int64      `json:"validity"`
	Priority          int         `json:"priority"`
	Messages          []struct {
		Phone   string `json:"phone"`
		Message string `json:"message"`
	} `json:"messages"`
}

type bulkJSON struct {
	Queued   int      `json:"queued"`
	QueueIDs []string `json:"queueIds"`
	// Routes is where a pool sent each message, in input order; only for
	// a bulk send through a pool.
	Routes []*routeJSON `json:"routes,omitempty"`
}

// chatSendBulk stores up to sms.MaxBulk messages in one commit; the rate
// limit counts the request once, the plan each message.
func (s *Server) chatSendBulk(c echo.Context) error {
	release, err := s.bulks.take(c.Request().Context(), principal(c).CompanyID)
	if err != nil {
		return err
	}
	defer release()
	var in bulkBody
	if err := bind(c, &in); err != nil {
		return err
	}
	p, key := principal(c), idempotencyKey(c, in)
	items := make([]sms.BulkItem, len(in.Messages))
	for i, m := range in.Messages {
		items[i] = sms.BulkItem{Phone: m.Phone, Message: m.Message}
	}
	answer := func(ms []store.Message) (int, []byte) {
		out := bulkJSON{Queued: len(ms), QueueIDs: make([]string, len(ms))}
		for i, m := range ms {
			out.QueueIDs[i] = m.UUID
			if m.Pool != "" {
				if out.Routes == nil {
					out.Routes = make([]*routeJSON, len(ms))
				}
				out.Routes[i] = routeOf(m)
			}
		}
		body, _ := json.Marshal(out)
		return http.StatusOK, body
	}
	ms, prior, err := s.deps.SMS.SendBulk(c.Request().Context(), sms.BulkInput{
		CompanyID: p.CompanyID, UserID: p.UserID, Device: in.DeviceFingerprint, Pool: in.Pool, SIMSlot: in.SIMSlot, SendAt: in.SendAt,
		Window: in.Window.window(), ExpiresAt: in.ExpiresAt, Validity: in.Validity, Priority: in.Priority,
		Messages: items, IdempotencyKey: key,
	}, answer)
	if err != nil {
		return err
	}
	if prior != nil {
		return replay(c, key, prior)
	}
	status, body := answer(ms)
	return c.JSONBlob(status, body)
}

// cancelQueued takes back a scheduled or queued message.
func (s *Server) cancelQueued(c echo.Context) error {
	m, err := s.deps.SMS.Cancel(c.Request().Context(), principal(c).CompanyID, c.Param("queueId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, queueItem(m, s.deps.Now()))
}

// sendWord is /chat/send's message: what became of the send.
func sendWord(m store.Message) string {
	if m.Status == store.MsgScheduled {
		return "scheduled"
	}
	return "queued"
}
