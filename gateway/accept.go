package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/nulchar"
	"github.com/simrelay/simrelay/internal/outage"
	"github.com/simrelay/simrelay/store"
)

// badToken is the 401's message for an upgrade without a live device token.
const badToken = "The device token is missing, invalid or revoked. Pair the phone again."

// ServeHTTP is GET /device/ws: check the device token, upgrade, and hand the
// link to its own goroutines. The handler goroutine returns at once, so its
// (large) stack does not stay pinned for the days a phone stays connected.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || nulchar.Differ(r.Header.Values("Authorization")) {
		// No scheme, another one, or header lines that differ (whichever a
		// proxy in front checked, the link must not be another's): no credential.
		token = ""
	}
	token = strings.TrimSpace(token)
	// A credential that is no device token (none, or another kind) is
	// refused before the gate: it would ask the store nothing, so it is no
	// probe of it, and must neither take the probe's turn nor, answered,
	// open the gate while the store is out of reach.
	if !strings.HasPrefix(token, device.TokenPrefix) {
		writeError(w, http.StatusUnauthorized, "unauthorized", badToken)
		return
	}
	// While the store is known to be out of reach, the phone is refused
	// without asking it, but for one probe a second (outage.go).
	if refused, cause := h.gate.refuse(h.now()); refused {
		h.refuseUnavailable(w, cause)
		return
	}
	dev, err := h.devices.Authenticate(r.Context(), token)
	switch {
	case errors.Is(err, store.ErrUnavailable):
		h.gate.failed(h.now(), err)
		h.refuseUnavailable(w, err)
		return
	case err == nil || errors.Is(err, store.ErrNotFound):
		h.gate.answered()
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusUnauthorized, "unauthorized", badToken)
		return
	case err != nil:
		h.log.Error("device authentication failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "The server failed to check the device token; it has been logged.")
		return
	case dev.Status == store.DeviceDisabled:
		writeError(w, http.StatusForbidden, "device_disabled", "This device is disabled. Set its status to active (PATCH /device/{device_fingerprint}) to connect it again.")
		return
	}
	if h.isDraining() {
		w.Header().Set("Retry-After", strconv.Itoa(outage.RetryAfter))
		writeError(w, http.StatusServiceUnavailable, "unavailable", "The server is restarting; connect again shortly.")
		return
	}
	// Phones are not browsers and authenticate with a bearer token, never a
	// cookie, so cross-origin checks protect nothing here.
	sw := smallBuffers(w)
	var c *conn // set before its reader starts, the only goroutine that reads pongs
	ws, err := websocket.Accept(sw, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true,
		// The reader takes pongs between frames (awaitFrame); one that comes
		// while the library is reading a frame is the library's to read, and
		// answers the link's ping all the same.
		OnPongReceived: func(context.Context, []byte) { c.ponged() },
		// The phone's own pings are answered only within their bound
		// (flood.go): each costs the server a pong written.
		OnPingReceived: func(context.Context, []byte) bool { return c.pinged() },
	})
	if err != nil {
		return // Accept has answered the client
	}
	ws.SetReadLimit(proto.MaxFrameBytes)
	sock := hijacked(sw)
	if err := setSendBuffer(sock, h.cfg.SendBuffer); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		h.log.Warn("phone link: the socket's send buffer was not bounded", "err", err)
	}
	c = newConn(h, ws, sock, dev, token)
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		ws.Close(proto.CloseRestarting, "server restarting")
		return
	}
	h.links[c] = struct{}{}
	// Under the hub's lock, as spawn counts a link's first goroutine: not
	// draining, so Shutdown does not wait on the hub's wg yet. c cannot be
	// found before run registers it, so gmu is not needed.
	c.launch(taskSetup, c.run)
	h.mu.Unlock()
}

// refuseUnavailable answers an upgrade while the database does not answer
// (err, the store call that found it so): the phone is told to come back
// (503 unavailable), as any route tells its client, in the same words of
// what happened (its database out of reach, its disk full, the embedded
// store's data file gone), not that the server failed, and comes back
// within seconds (PROTOCOL.md section 14). Every
// phone reconnecting meets it, thousands of refusals for a fleet: one line
// per outage.LogEvery says so, as the API spaces those of its requests, with
// how many were left out, not one line per phone.
func (h *Hub) refuseUnavailable(w http.ResponseWriter, err error) {
	if suppressed, ok := h.unavailable.Due(h.now(), outage.LogEvery); ok {
		h.log.Error("device authentication failed: the database does not answer", "err", err, "suppressed", suppressed)
	}
	what, later := outage.Reason(err)
	if what == "" { // err is always an outage's; never say nothing
		what = "The server cannot reach its database"
	}
	when := "shortly"
	if later {
		when = "later"
	}
	w.Header().Set("Retry-After", strconv.Itoa(outage.RetryAfter))
	writeError(w, http.StatusServiceUnavailable, "unavailable", what+"; connect again "+when+".")
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "message": msg})
}
