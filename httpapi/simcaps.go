package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// Per-SIM caps of a device (docs/routing.md).

type simCapsJSON struct {
	Slot             string `json:"slot"`
	PerDay           *int64 `json:"per_day"`
	PerMonth         *int64 `json:"per_month"`
	RecipientsPerDay *int64 `json:"recipients_per_day"`
	SentToday        int64  `json:"sent_today"`
	SentThisMonth    int64  `json:"sent_this_month"`
	RecipientsToday  int64  `json:"recipients_today"`
}

func capOrNull(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

func simCapsOut(us []store.SIMUsage) map[string]any {
	out := make([]simCapsJSON, len(us))
	for i, u := range us {
		out[i] = simCapsJSON{Slot: u.Slot, PerDay: capOrNull(u.Caps.PerDay), PerMonth: capOrNull(u.Caps.PerMonth),
			RecipientsPerDay: capOrNull(u.Caps.RecipientsPerDay), SentToday: u.Day, SentThisMonth: u.Month, RecipientsToday: u.Recipients}
	}
	return map[string]any{"sims": out}
}

type simCapsBody struct {
	SIMs []struct {
		Slot             string `json:"slot"`
		PerDay           *int64 `json:"per_day"`
		PerMonth         *int64 `json:"per_month"`
		RecipientsPerDay *int64 `json:"recipients_per_day"`
	} `json:"sims"`
}

func (s *Server) getSIMCaps(c echo.Context) error {
	us, err := s.deps.SMS.SIMCaps(c.Request().Context(), principal(c).CompanyID, c.Param("device_fingerprint"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, simCapsOut(us))
}

func (s *Server) putSIMCaps(c echo.Context) error {
	var in simCapsBody
	if err := bind(c, &in); err != nil {
		return err
	}
	caps := make([]sms.SIMCapsInput, len(in.SIMs))
	for i, v := range in.SIMs {
		caps[i] = sms.SIMCapsInput{Slot: v.Slot, PerDay: v.PerDay, PerMonth: v.PerMonth, RecipientsPerDay: v.RecipientsPerDay}
	}
	us, err := s.deps.SMS.SetSIMCaps(c.Request().Context(), principal(c).CompanyID, c.Param("device_fingerprint"), caps)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, simCapsOut(us))
}
