package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// Registration is what POST /device/register hands a phone.
type Registration struct {
	DeviceToken string `json:"device_token"`
	WSURL       string `json:"ws_url"`
}

// Problem says what is wrong with a registration kept on disk (a phone's
// token file, the agent's configuration), "" when nothing: its token must
// be a device token (dt_ and base64url, PROTOCOL.md section 4, so that it
// can go in an Authorization header) and its link address a ws:// or
// wss:// URL, as POST /device/register hands them out. A file that fails
// it is damaged: dialing with it would be retried forever.
func (r Registration) Problem() string {
	tok, ok := strings.CutPrefix(r.DeviceToken, "dt_")
	if !ok || tok == "" || len(tok) > 256 || strings.ContainsFunc(tok, func(c rune) bool {
		return !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_')
	}) {
		return "its device_token is not a device token"
	}
	u, err := url.Parse(r.WSURL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return "its ws_url is not a ws:// or wss:// URL"
	}
	return ""
}

// APIError is a refusal from the REST API, with the contract's error body.
type APIError struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
	Field   string `json:"field"`
	// RetryAfter is the server's Retry-After (on 429 and 503), 0 when absent.
	RetryAfter time.Duration `json:"-"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// RegisterInput is the body of POST /device/register.
type RegisterInput struct {
	PairingCode       string      `json:"pairing_code"`
	DeviceFingerprint string      `json:"device_fingerprint"`
	DeviceName        string      `json:"device_name"`
	SIMs              []proto.SIM `json:"sims"`
	FCMToken          string      `json:"fcm_token,omitempty"`
	AppVersion        string      `json:"app_version"`
}

// Register spends a pairing code at the server (its base URL, e.g.
// http://127.0.0.1:8080) and returns the device token and WebSocket address.
func Register(ctx context.Context, hc *http.Client, serverURL string, in RegisterInput) (Registration, error) {
	var reg Registration
	body, err := json.Marshal(in)
	if err != nil {
		return reg, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(serverURL, "/")+"/device/register", bytes.NewReader(body))
	if err != nil {
		return reg, err
	}
	req.Header.Set("Content-Type", "application/json")
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return reg, fmt.Errorf("client: register: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		return reg, readAPIError(res)
	}
	if err := json.NewDecoder(res.Body).Decode(&reg); err != nil {
		return reg, fmt.Errorf("client: register answer: %w", err)
	}
	return reg, nil
}

func readAPIError(res *http.Response) error {
	e := &APIError{Status: res.StatusCode}
	if secs, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && secs > 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	if err := json.NewDecoder(res.Body).Decode(e); err != nil || e.Code == "" {
		e.Code, e.Message = "http_"+fmt.Sprint(res.StatusCode), res.Status
	}
	return e
}
