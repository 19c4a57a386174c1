package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/account"
	androidproto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/store"
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
// 202 once the company is marked closing and every credential of it is
// gone; the server removes the rest in the background. The phones linked
// to its devices are told their device is gone (4503), on whichever node
// they are linked.
func (s *Server) closeCompany(c echo.Context) error {
	var in struct {
		Confirm string `json:"confirm"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	ctx, p := c.Request().Context(), principal(c)
	// Read before the devices go with the company's credentials.
	var devs []store.Device
	if !p.ViaAPIKey {
		var err error
		if devs, err = s.deps.Devices.List(ctx, p.CompanyID); err != nil {
			return err
		}
	}
	co, err := s.deps.Accounts.CloseCompany(ctx, p, in.Confirm)
	if err != nil {
		return err
	}
	for _, d := range devs {
		// Nothing waits for the link's last seen: its device is gone, with
		// the reason PROTOCOL.md gives a deleted device (4503).
		s.deps.Phones.Disconnect(d.Fingerprint, d.ID, androidproto.CloseDeviceGone, "device deleted")
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
