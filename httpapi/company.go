package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/account"
)

func (s *Server) getCompany(c echo.Context) error {
	co, err := s.deps.Accounts.Company(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, companyOut(co))
}

func (s *Server) patchCompany(c echo.Context) error {
	var in struct {
		Name    *string `json:"name"`
		Phone   *string `json:"phone"`
		Address *string `json:"address"`
		City    *string `json:"city"`
		State   *string `json:"state"`
		Country *string `json:"country"`
		// OptOutKeywords is a boolean setting: true/false/1/0.
		OptOutKeywords json.RawMessage `json:"optOutKeywords"`
		EmailDevice    *string         `json:"emailDevice"`
		Region         *string         `json:"region"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	keywords, err := settingBool(in.OptOutKeywords, "optOutKeywords")
	if err != nil {
		return err
	}
	co, err := s.deps.Accounts.UpdateCompany(c.Request().Context(), principal(c), account.CompanyPatch{
		Name: in.Name, Phone: in.Phone, Address: in.Address, City: in.City, State: in.State, Country: in.Country, OptOutKeywords: keywords,
		EmailDevice: in.EmailDevice, Region: in.Region,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, companyOut(co))
}

// closeCompany closes the caller's company (account.Service.CloseCompany):
// 202 once the company is marked closing, every credential of it is gone
// and the phones linked to its devices, on whichever node, are told their
// device is gone (4503); the server removes the rest in the background.
func (s *Server) closeCompany(c echo.Context) error {
	var in struct {
		Confirm string `json:"confirm"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	co, err := s.deps.Accounts.CloseCompany(c.Request().Context(), principal(c), in.Confirm, s.deps.Phones)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, closingJSON{CompanyID: co.ID, Closing: true, ClosingAt: ts(co.ClosingAt)})
}

// closingJSON answers DELETE /company.
type closingJSON struct {
	CompanyID uint64 `json:"companyId"`
	Closing   bool   `json:"closing"`
	ClosingAt string `json:"closingAt"`
}

type apiKeyJSON struct {
	APIKey    string `json:"apiKey"`
	CreatedAt string `json:"createdAt"`
}

func (s *Server) getAPIKey(c echo.Context) error {
	return s.apiKeyAnswer(c, s.deps.Accounts.APIKey)
}

func (s *Server) rotateAPIKey(c echo.Context) error {
	return s.apiKeyAnswer(c, s.deps.Accounts.RotateAPIKey)
}

func (s *Server) apiKeyAnswer(c echo.Context, f func(ctx context.Context, p account.Principal) (string, time.Time, error)) error {
	key, at, err := f(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, apiKeyJSON{APIKey: key, CreatedAt: ts(at)})
}
