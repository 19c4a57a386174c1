package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook"
)

// webhookJSON is a webhook entry; the lists are always arrays, empty meaning all.
type webhookJSON struct {
	ID        uint64   `json:"id"`
	URL       string   `json:"url"`
	Active    bool     `json:"active"`
	Devices   []string `json:"devices"`
	SIMs      []int    `json:"sims"`
	Channels  []string `json:"channels"`
	WANumbers []string `json:"wa_numbers"`
	IMHandles []string `json:"im_handles"`
	Events    []string `json:"events,omitempty"` // shown only when the entry chose its events
}

func webhookOut(e store.WebhookEntry) webhookJSON {
	orEmpty := func(v []string) []string {
		if v == nil {
			return []string{}
		}
		return v
	}
	sims := e.SIMs
	if sims == nil {
		sims = []int{}
	}
	return webhookJSON{ID: e.ID, URL: e.URL, Active: e.Active, Devices: orEmpty(e.Devices), SIMs: sims,
		Channels: orEmpty(e.Channels), WANumbers: orEmpty(e.WANumbers), IMHandles: orEmpty(e.IMHandles), Events: e.Events}
}

func webhooksOut(entries []store.WebhookEntry) []webhookJSON {
	out := make([]webhookJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, webhookOut(e))
	}
	return out
}

// webhookInJSON is one entry of a PUT. Active is a boolean input, which
// takes 1 and 0 as well as true and false (settingBool).
type webhookInJSON struct {
	ID        *int64          `json:"id"`
	URL       string          `json:"url"`
	Active    json.RawMessage `json:"active"`
	Devices   []string        `json:"devices"`
	SIMs      []int           `json:"sims"`
	Channels  []string        `json:"channels"`
	WANumbers []string        `json:"wa_numbers"`
	IMHandles []string        `json:"im_handles"`
	Events    []string        `json:"events"`
}

func (s *Server) getWebhooks(c echo.Context) error {
	set, err := s.deps.Webhooks.Settings(c.Request().Context(), principal(c).CompanyID)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, map[string]any{"webhooks": webhooksOut(set.Entries), "signingSecret": set.Secret})
}

func (s *Server) putWebhooks(c echo.Context) error {
	var body struct {
		Webhooks []webhookInJSON `json:"webhooks"`
	}
	if err := bind(c, &body); err != nil {
		return err
	}
	var entries []webhook.EntryInput
	if body.Webhooks != nil {
		entries = make([]webhook.EntryInput, len(body.Webhooks))
	}
	for i, in := range body.Webhooks {
		active, err := settingBool(in.Active, fmt.Sprintf("webhooks[%d].active", i))
		if err != nil {
			return err
		}
		entries[i] = webhook.EntryInput{ID: in.ID, URL: in.URL, Active: active, Devices: in.Devices, SIMs: in.SIMs,
			Channels: in.Channels, WANumbers: in.WANumbers, IMHandles: in.IMHandles, Events: in.Events}
	}
	stored, err := s.deps.Webhooks.Replace(c.Request().Context(), principal(c).CompanyID, entries)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"message": "Webhooks saved.", "webhooks": webhooksOut(stored)})
}

func (s *Server) rotateSigningSecret(c echo.Context) error {
	secret, err := s.deps.Webhooks.RotateSecret(c.Request().Context(), principal(c).CompanyID)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, map[string]string{"signingSecret": secret})
}

// webhookAttemptJSON is one line of the deliveries log: one attempt. The
// nullable fields are null when they do not apply (no HTTP answer, no error,
// no further attempt).
type webhookAttemptJSON struct {
	ID            uint64  `json:"id"`
	WebhookID     uint64  `json:"webhook_id"`
	EventID       string  `json:"event_id"`
	DeliveryID    string  `json:"delivery_id"`
	EventType     string  `json:"event_type"`
	Attempt       int     `json:"attempt"`
	State         string  `json:"state"`
	StatusCode    *int    `json:"status_code"`
	Error         *string `json:"error"`
	DurationMS    int64   `json:"duration_ms"`
	CreatedAt     string  `json:"created_at"`
	NextAttemptAt *string `json:"next_attempt_at"`
}

func webhookAttemptOut(a store.WebhookAttempt) webhookAttemptJSON {
	out := webhookAttemptJSON{ID: a.ID, WebhookID: a.WebhookID, EventID: a.EventID, DeliveryID: a.DeliveryID,
		EventType: a.EventType, Attempt: a.Attempt, State: a.State, DurationMS: a.DurationMS, CreatedAt: ts(a.CreatedAt)}
	if a.StatusCode != 0 {
		out.StatusCode = &a.StatusCode
	}
	if a.Error != "" {
		out.Error = &a.Error
	}
	if !a.NextAttemptAt.IsZero() {
		next := ts(a.NextAttemptAt)
		out.NextAttemptAt = &next
	}
	return out
}

func (s *Server) webhookDeliveries(c echo.Context) error {
	var webhookID uint64
	if v := c.QueryParam("webhook_id"); v != "" {
		// Digits past the largest id name no webhook: an empty list, as
		// for any unknown id.
		id, ok := queryID(v)
		if !ok {
			return problem.Invalid("webhook_id", "must be a webhook id, a positive whole number in digits without leading zeros")
		}
		webhookID = id
	}
	limit, err := queryRange(c, "limit", webhook.MaxLogLimit, 1, webhook.MaxLogLimit)
	if err != nil {
		return err
	}
	lines, err := s.deps.Webhooks.Deliveries(c.Request().Context(), principal(c).CompanyID, webhookID, limit)
	if err != nil {
		return err
	}
	out := make([]webhookAttemptJSON, 0, len(lines))
	for _, a := range lines {
		out = append(out, webhookAttemptOut(a))
	}
	return c.JSON(http.StatusOK, map[string]any{"deliveries": out})
}
