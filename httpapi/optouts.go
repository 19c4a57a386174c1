package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

type optOutJSON struct {
	Phone     string `json:"phone"`
	Source    string `json:"source"`
	CreatedAt string `json:"created_at"`
	// NumberType is numplan.Type of Phone, where the numbering data knows it.
	NumberType string `json:"number_type,omitempty"`
}

func optOutOut(o store.OptOut) optOutJSON {
	return optOutJSON{Phone: o.Phone, Source: o.Source, CreatedAt: ts(o.CreatedAt), NumberType: numplan.Type(o.Phone)}
}

// listOptOuts answers one page of the list in number order; ?after= is the
// last number of the previous page.
func (s *Server) listOptOuts(c echo.Context) error {
	limit, err := queryRange(c, "limit", sms.MaxOptOutPage, 1, sms.MaxOptOutPage)
	if err != nil {
		return err
	}
	list, err := s.deps.SMS.OptOuts(c.Request().Context(), principal(c).CompanyID, queryPhone(c, "after"), limit)
	if err != nil {
		return err
	}
	out := make([]optOutJSON, 0, len(list))
	for _, o := range list {
		out = append(out, optOutOut(o))
	}
	return c.JSON(http.StatusOK, map[string]any{"opt_outs": out})
}

// addOptOut answers 201 with a new entry, 200 with one already listed.
func (s *Server) addOptOut(c echo.Context) error {
	var in struct {
		Phone string `json:"phone"`
	}
	if err := bind(c, &in); err != nil {
		return err
	}
	o, created, err := s.deps.SMS.AddOptOut(c.Request().Context(), principal(c).CompanyID, in.Phone)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, optOutOut(o))
}

// removeOptOut is DELETE /opt-outs/{phone}. The parameter is decoded
// already, once, by canonicalPath.
func (s *Server) removeOptOut(c echo.Context) error { return s.dropOptOut(c, c.Param("phone")) }

// removeOptOutByQuery is DELETE /opt-outs?phone=: the entry named in the
// query, for the entries no path can name (a sender holding a "/", since a
// path never carries an encoded slash, or one that is "." or "..").
func (s *Server) removeOptOutByQuery(c echo.Context) error {
	return s.dropOptOut(c, c.QueryParam("phone"))
}

// dropOptOut takes the entry a request names off the company's list.
func (s *Server) dropOptOut(c echo.Context, number string) error {
	if err := s.deps.SMS.RemoveOptOut(c.Request().Context(), principal(c).CompanyID, plusOfSpace(number)); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, messageJSON{Message: "The number is off the opt-out list."})
}

// settingBool reads an optional boolean setting, which the contract lets
// clients write as true/false, 1/0 or those as strings. Absent is nil.
func settingBool(raw json.RawMessage, field string) (*bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	v := strings.Trim(string(raw), `"`)
	switch strings.ToLower(v) {
	case "true", "1":
		t := true
		return &t, nil
	case "false", "0":
		f := false
		return &f, nil
	}
	return nil, problem.Invalid(field, "must be true or false (1 or 0)")
}
