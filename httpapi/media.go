package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/internal/nulchar"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// uploadMedia is POST /device/media: an agent stores one file of a message
// it received, with its device token, before the inbound frame naming it.
func (s *Server) uploadMedia(c echo.Context) error {
	err := s.storeUpload(c)
	// Its body may take far longer than the answer's deadline to arrive (two
	// minutes for each 256 KiB): the answer's time starts once it is stored
	// or refused, not at the request's start (serve), or a slow link's
	// file was stored and its answer never written.
	_ = http.NewResponseController(c.Response()).SetWriteDeadline(time.Now().Add(s.cfg.AnswerWriteTimeout))
	if err != nil {
		// A refused upload's body is unread, or read in part. net/http
		// would read up to 256 KiB more of a chunked one before it answered,
		// to keep the connection: the answer goes out at once instead, and
		// the connection closes after it.
		c.Response().Header().Set(echo.HeaderConnection, "close")
	}
	return err
}

func (s *Server) storeUpload(c echo.Context) error {
	if s.deps.Media == nil {
		return echo.ErrNotFound
	}
	dev, ok := c.Get(keyDevice).(store.Device)
	if !ok {
		return deviceRefusal(c)
	}
	if err := uploadAllowed(dev); err != nil {
		return err
	}
	q := c.QueryParams()
	r := c.Request()
	m, dup, err := s.deps.Media.Put(r.Context(), dev, media.Upload{
		Key: q.Get("key"), Filename: q.Get("filename"), ContentType: r.Header.Get(echo.HeaderContentType),
		Length: r.ContentLength, Body: r.Body, ReadDeadline: http.NewResponseController(c.Response()).SetReadDeadline,
		Recheck: func() error { return s.recheckDevice(c, dev) },
	})
	if err != nil {
		return err
	}
	code := http.StatusCreated
	if dup {
		code = http.StatusOK
	}
	return c.JSON(code, mediaOut(m))
}

// uploadAllowed refuses an upload of a disabled device, as its link is
// refused: a disabled device stores nothing.
func uploadAllowed(dev store.Device) error {
	if dev.Status == store.DeviceDisabled {
		return problem.New(problem.DeviceDisabled, "This device is disabled. Set its status to active (PATCH /device/{device_fingerprint}) to upload again.")
	}
	return nil
}

// recheckDevice authenticates an upload's device token again once the
// body has arrived, as readBody's recheck does every other route's
// credential: the file is stored only for a device that still holds this
// token (not paired again since, nor deleted) and is not disabled. The
// body may take far longer than any other request's to arrive (two
// minutes for each 256 KiB).
func (s *Server) recheckDevice(c echo.Context, was store.Device) error {
	tok, _ := c.Get(keyToken).(string)
	dev, err := s.deps.Devices.Authenticate(c.Request().Context(), tok)
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && dev.ID != was.ID:
		return problem.New(problem.Unauthorized, "The device token is missing, invalid or revoked.")
	case err != nil:
		// The database out of reach: 503, not a 401 that would tell the
		// phone to pair again.
		return err
	}
	return uploadAllowed(dev)
}

// deviceRefusal is the answer to an upload that identify found no device
// for: why its token names none (unknown or revoked, or the store's
// failure), or why it carries no device token. identify looks a token up,
// once for the request, only behind Authorization lines that agree; lines
// that differ are refused here, whichever of them would name a device.
func deviceRefusal(c echo.Context) error {
	if err, ok := c.Get(keyDeviceErr).(error); ok {
		if errors.Is(err, store.ErrNotFound) {
			return problem.New(problem.Unauthorized, "The device token is missing, invalid or revoked.")
		}
		// Not a bad token: the database out of reach is 503, as at the link's
		// upgrade, and a 401 would tell the phone to pair again.
		return err
	}
	if nulchar.Differ(c.Request().Header.Values(echo.HeaderAuthorization)) {
		// identify reads no credential behind a first line that is empty,
		// so the lines are compared here too.
		return problem.New(problem.Unauthorized, twoCredentials)
	}
	return problem.New(problem.Unauthorized, "This route needs Authorization: Bearer <device token>.")
}

type mediaJSON struct {
	ID          string `json:"id"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	Filename    string `json:"filename,omitempty"`
}

func mediaOut(m store.Media) mediaJSON {
	return mediaJSON{ID: m.ID, ContentType: m.ContentType, Size: m.Size, Filename: m.Filename}
}

// getMedia is GET /media/{id}: a file of a received message, for a member
// of its company (API key or access token), or for anyone holding a signed
// link of a webhook payload (?expires=&signature=) until it expires.
// Another company's file, like an unknown one, is 404. media.Serve says
// what keeps the file from running on the API's origin.
func (s *Server) getMedia(c echo.Context) error {
	if s.deps.Media == nil {
		return echo.ErrNotFound
	}
	id := c.Param("id")
	var m store.Media
	var err error
	if sig := c.QueryParam("signature"); sig != "" || c.QueryParam("expires") != "" {
		if err := s.deps.Media.Verify(id, c.QueryParam("expires"), sig); err != nil {
			return problem.New(problem.Forbidden, "The link is not valid or has expired: ask for the message again (GET /whatsapp/messages/{id}) or use a credential.")
		}
		m, err = s.deps.Media.Get(0, id)
	} else {
		p, ok := c.Get(keyPrincipal).(account.Principal)
		if !ok {
			if err, ok := c.Get(keyAuthErr).(error); ok {
				return err
			}
			return problem.New(problem.Unauthorized, "This route needs Authorization: Bearer <API key or access token>, or a signed link.")
		}
		m, err = s.deps.Media.Get(p.CompanyID, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return problem.New(problem.NotFound, "No such media.")
	}
	if err != nil {
		return err
	}
	if err := s.deps.Media.Serve(c.Response(), c.Request(), m); err != nil {
		if refused, ok := err.(*problem.Error); ok {
			return refused // a range past the end (416) or the company's downloads all under way (429), before anything was written
		}
		s.deps.Logger.Warn("media: copy failed", "media", m.ID, "err", err)
	}
	return nil
}
