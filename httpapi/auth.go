package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/account"
)

type sessionJSON struct {
	AccessToken  string   `json:"accessToken"`
	RefreshToken string   `json:"refreshToken"`
	TokenType    string   `json:"tokenType"`
	ExpiresIn    int      `json:"expiresIn"`
	User         userJSON `json:"user"`
}

func sessionOut(s account.Session) sessionJSON {
	return sessionJSON{AccessToken: s.AccessToken, RefreshToken: s.RefreshToken, TokenType: "Bearer", ExpiresIn: s.ExpiresIn, User: userOut(s.User)}
}

func (s *Server) signup(c echo.Context) error {
	// A closed server refuses before the body is read: every sign-up gets
	// the same 403, whatever it holds.
	if err := s.deps.Accounts.CheckSignup(); err != nil {
		return err
	}
	var in struct {
		Company struct {
			Name    string `json:"name"`
			Phone   string `json:"phone"`
			Address string `json:"address"`
			City    string `json:"city"`
			State   string `json:"state"`
			Country string `json:"country"`
		} `json:"company"`
		Owner struct {
			FirstName string `json:"firstName"`
			LastName  string `json:"lastName"`
			Email     string `json:"email"`
			Password  string `json:"password"`
			Phone     string `json:"phone"`
		} `json:"owner"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	co, u, err := s.deps.Accounts.Signup(c.Request().Context(), account.SignupInput{
		Company: account.CompanyInput(in.Company),
		Owner:   account.OwnerInput(in.Owner),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{
		"message":   "Company created. Check your e-mail to verify your address, then log in.",
		"companyId": co.ID,
		"userId":    u.ID,
	})
}

func (s *Server) verifyEmail(c echo.Context) error {
	var in struct {
		Token string `json:"token"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	if err := s.deps.Accounts.VerifyEmail(c.Request().Context(), in.Token); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, messageJSON{"E-mail address verified. You can log in now."})
}

func (s *Server) login(c echo.Context) error {
	var in struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	r := c.Request()
	ctx := account.WithDevice(account.WithClient(r.Context(), c.RealIP()), account.PresentedDevice(r))
	sess, err := s.deps.Accounts.Login(ctx, in.Email, in.Password)
	if err != nil {
		return err
	}
	// The device cookie is an addition to the answer, not part of its
	// body (docs/security.md "Device cookies").
	c.SetCookie(account.DeviceHTTPCookie(sess.Device, s.cfg.PublicURL, r))
	return sessionAnswer(c, sess)
}

func (s *Server) refresh(c echo.Context) error {
	var in struct {
		RefreshToken string `json:"refreshToken"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	sess, err := s.deps.Accounts.Refresh(c.Request().Context(), in.RefreshToken)
	if err != nil {
		return err
	}
	return sessionAnswer(c, sess)
}

// sessionAnswer is the answer of login and refresh: tokens, which no cache
// in between may keep (no-store, as RFC 6749 5.1 asks of token answers).
func sessionAnswer(c echo.Context, sess account.Session) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, sessionOut(sess))
}

func (s *Server) forgotPassword(c echo.Context) error {
	var in struct {
		Email string `json:"email"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	if err := s.deps.Accounts.ForgotPassword(c.Request().Context(), in.Email); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, messageJSON{"If the address belongs to an account, a reset link is on its way."})
}

func (s *Server) resetPassword(c echo.Context) error {
	var in struct {
		Token    string `json:"token"`
		Password string `json:"password"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	if err := s.deps.Accounts.ResetPassword(c.Request().Context(), in.Token, in.Password); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, messageJSON{"Password set. Every earlier session was signed out; log in with the new password."})
}
