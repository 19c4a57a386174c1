package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// Sender pools (docs/routing.md).

type poolMemberJSON struct {
	ID                uint64 `json:"id"`
	DeviceFingerprint string `json:"device_fingerprint"`
	SIMSlot           string `json:"sim_slot"`
}

type poolJSON struct {
	ID       uint64 `json:"id"`
	Name     string `json:"name"`
	Strategy string `json:"strategy"`
	Fallback string `json:"fallback,omitempty"`
	// FailoverAfter is in seconds; 0: no failover.
	FailoverAfter int64 `json:"failover_after"`
	// Window is when the pool's sends may go out; null: any time.
	Window    *windowJSON      `json:"window"`
	Members   []poolMemberJSON `json:"members"`
	CreatedAt string           `json:"created_at"`
	UpdatedAt string           `json:"updated_at"`
}

func poolOut(p store.Pool) poolJSON {
	out := poolJSON{ID: p.ID, Name: p.Name, Strategy: p.Strategy, Fallback: p.Fallback, FailoverAfter: int64(p.FailoverAfter / time.Second),
		Window: windowOut(p.Window), Members: make([]poolMemberJSON, len(p.Members)), CreatedAt: ts(p.CreatedAt), UpdatedAt: ts(p.UpdatedAt)}
	for i, m := range p.Members {
		out.Members[i] = memberOut(m)
	}
	return out
}

func memberOut(m store.PoolMember) poolMemberJSON {
	return poolMemberJSON{ID: m.ID, DeviceFingerprint: m.Device, SIMSlot: m.SIMSlot}
}

type poolMemberBody struct {
	DeviceFingerprint string `json:"device_fingerprint"`
	SIMSlot           string `json:"sim_slot"`
}

// poolBody is the body of POST /pools and PATCH /pools/{id}; each field
// tells absent from null (field): fallback and failover_after are cleared
// by null ("" and 0: no fallback of its own, no failover), window taken
// away; name, strategy and members cannot be (400).
type poolBody struct {
	Name          field[string]           `json:"name"`
	Strategy      field[string]           `json:"strategy"`
	Fallback      field[string]           `json:"fallback"`
	FailoverAfter field[int64]            `json:"failover_after"`
	Window        field[windowJSON]       `json:"window"`
	Members       field[[]poolMemberBody] `json:"members"`
}

func (b poolBody) input() (sms.PoolInput, error) {
	in := sms.PoolInput{Fallback: b.Fallback.clearable(), FailoverAfter: b.FailoverAfter.clearable(), WindowSet: b.Window.Set}
	var err error
	if in.Name, err = b.Name.value("name"); err != nil {
		return in, err
	}
	if in.Strategy, err = b.Strategy.value("strategy"); err != nil {
		return in, err
	}
	if b.Window.Set && !b.Window.Null {
		in.Window = b.Window.Value.window()
	}
	members, err := b.Members.value("members")
	if err != nil {
		return in, err
	}
	if members != nil {
		ms := make([]sms.PoolMemberInput, len(*members))
		for i, m := range *members {
			ms[i] = sms.PoolMemberInput{Device: m.DeviceFingerprint, SIMSlot: m.SIMSlot}
		}
		in.Members = &ms
	}
	return in, nil
}

func (s *Server) listPools(c echo.Context) error {
	ps, err := s.deps.SMS.Pools(c.Request().Context(), principal(c).CompanyID)
	if err != nil {
		return err
	}
	out := make([]poolJSON, len(ps))
	for i, p := range ps {
		out[i] = poolOut(p)
	}
	return c.JSON(http.StatusOK, map[string]any{"pools": out})
}

func (s *Server) createPool(c echo.Context) error {
	var body poolBody
	if err := bind(c, &body); err != nil {
		return err
	}
	in, err := body.input()
	if err != nil {
		return err
	}
	p, err := s.deps.SMS.CreatePool(c.Request().Context(), principal(c).CompanyID, in)
	if err != nil {
		return err
	}
	s.setLocation(c, "/pools/"+strconv.FormatUint(p.ID, 10))
	return c.JSON(http.StatusCreated, poolOut(p))
}

func (s *Server) getPool(c echo.Context) error {
	id := pathID(c, "id")
	p, err := s.deps.SMS.Pool(c.Request().Context(), principal(c).CompanyID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, poolOut(p))
}

func (s *Server) patchPool(c echo.Context) error {
	id := pathID(c, "id")
	var body poolBody
	if err := bind(c, &body); err != nil {
		return err
	}
	in, err := body.input()
	if err != nil {
		return err
	}
	p, err := s.deps.SMS.UpdatePool(c.Request().Context(), principal(c).CompanyID, id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, poolOut(p))
}

func (s *Server) deletePool(c echo.Context) error {
	id := pathID(c, "id")
	p, err := s.deps.SMS.DeletePool(c.Request().Context(), principal(c).CompanyID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, poolOut(p))
}

func (s *Server) addPoolMember(c echo.Context) error {
	id := pathID(c, "id")
	var in poolMemberBody
	if err := bind(c, &in); err != nil {
		return err
	}
	_, m, err := s.deps.SMS.AddPoolMember(c.Request().Context(), principal(c).CompanyID, id, sms.PoolMemberInput{Device: in.DeviceFingerprint, SIMSlot: in.SIMSlot})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, memberOut(m))
}

func (s *Server) deletePoolMember(c echo.Context) error {
	id := pathID(c, "id")
	memberID := pathID(c, "memberId")
	p, err := s.deps.SMS.RemovePoolMember(c.Request().Context(), principal(c).CompanyID, id, memberID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, poolOut(p))
}
