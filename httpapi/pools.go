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

type poolBody struct {
	Name          *string           `json:"name"`
	Strategy      *string           `json:"strategy"`
	Fallback      *string           `json:"fallback"`
	FailoverAfter *int64            `json:"failover_after"`
	Window        windowField       `json:"window"`
	Members       *[]poolMemberBody `json:"members"`
}

func (b poolBody) input() sms.PoolInput {
	in := sms.PoolInput{Name: b.Name, Strategy: b.Strategy, Fallback: b.Fallback, FailoverAfter: b.FailoverAfter,
		WindowSet: b.Window.set, Window: b.Window.w.window()}
	if b.Members != nil {
		ms := make([]sms.PoolMemberInput, len(*b.Members))
		for i, m := range *b.Members {
			ms[i] = sms.PoolMemberInput{Device: m.DeviceFingerprint, SIMSlot: m.SIMSlot}
		}
		in.Members = &ms
	}
	return in
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
	var in poolBody
	if err := bind(c, &in); err != nil {
		return err
	}
	p, err := s.deps.SMS.CreatePool(c.Request().Context(), principal(c).CompanyID, in.input())
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
	var in poolBody
	if err := bind(c, &in); err != nil {
		return err
	}
	p, err := s.deps.SMS.UpdatePool(c.Request().Context(), principal(c).CompanyID, id, in.input())
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
