package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/account"
)

// userPatchJSON is the body of PATCH /users/me and PATCH /users/{id}; absent fields stay.
type userPatchJSON struct {
	FirstName *string `json:"firstName"`
	LastName  *string `json:"lastName"`
	Phone     *string `json:"phone"`
	Role      *string `json:"role"`
}

func (s *Server) getMe(c echo.Context) error {
	u, err := s.deps.Accounts.Me(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, userOut(u))
}

func (s *Server) patchMe(c echo.Context) error {
	var in userPatchJSON
	if err := bind(c, &in); err != nil {
		return err
	}
	u, err := s.deps.Accounts.UpdateMe(c.Request().Context(), principal(c), account.UserPatch{FirstName: in.FirstName, LastName: in.LastName, Phone: in.Phone})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, userOut(u))
}

func (s *Server) listUsers(c echo.Context) error {
	users, err := s.deps.Accounts.Users(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	out := make([]userJSON, 0, len(users))
	for _, u := range users {
		out = append(out, userOut(u))
	}
	return c.JSON(http.StatusOK, map[string]any{"users": out})
}

func (s *Server) inviteUser(c echo.Context) error {
	var in struct {
		FirstName string `json:"firstName"`
		LastName  string `json:"lastName"`
		Email     string `json:"email"`
		Phone     string `json:"phone"`
		Role      string `json:"role"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	u, err := s.deps.Accounts.Invite(c.Request().Context(), principal(c), account.InviteInput(in))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, userOut(u))
}

func (s *Server) patchUser(c echo.Context) error {
	id := pathID(c, "id")
	var in userPatchJSON
	if err := bind(c, &in); err != nil {
		return err
	}
	u, err := s.deps.Accounts.UpdateUser(c.Request().Context(), principal(c), id, account.UserPatch{FirstName: in.FirstName, LastName: in.LastName, Role: in.Role})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, userOut(u))
}

func (s *Server) deleteUser(c echo.Context) error {
	id := pathID(c, "id")
	if err := s.deps.Accounts.DeleteUser(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, messageJSON{"User removed."})
}
