package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/simrelay/simrelay/device"
)

// defaultPhoneTokenFile is where `simrelay phone` keeps its device token
// unless --token-file says otherwise: in the default data directory, one
// file per fingerprint, so that two virtual phones never share a token.
func defaultPhoneTokenFile(fingerprint string) string {
	return filepath.Join(defaultDataDir, "phone-"+fingerprint+".json")
}

// savedPhone is the token file: what a phone app keeps after pairing. The
// server and fingerprint say which registration it is; a file made for
// another server or device is not used.
type savedPhone struct {
	Server      string `json:"server"`
	Fingerprint string `json:"device_fingerprint"`
	DeviceToken string `json:"device_token"`
	WSURL       string `json:"ws_url"`
}

// maxPhoneTokenFile bounds what is read of a token file: one holds a few
// hundred bytes, so a longer one is no token file, and a huge one is not
// read into memory whole.
const maxPhoneTokenFile = 64 << 10

// damagedTokenFile is a token file that cannot be used: torn, not JSON,
// or holding a token or link address no registration hands out (one
// that could not even go in an HTTP header would be retried forever).
type damagedTokenFile struct{ path, why string }

func (e *damagedTokenFile) Error() string {
	return fmt.Sprintf("token file %s is damaged (%s)", e.path, e.why)
}

// loadPhoneToken reads the token file; ok is false when there is none, or
// it belongs to another server or device. A file that cannot be used is a
// *damagedTokenFile.
func loadPhoneToken(path, server, fingerprint string) (saved savedPhone, ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return saved, false, nil
	}
	if err != nil {
		return saved, false, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPhoneTokenFile+1))
	if err != nil {
		return saved, false, fmt.Errorf("token file %s: %w", path, err)
	}
	if len(data) > maxPhoneTokenFile {
		return saved, false, &damagedTokenFile{path, fmt.Sprintf("over %d KiB", maxPhoneTokenFile>>10)}
	}
	if err := json.Unmarshal(data, &saved); err != nil {
		return saved, false, &damagedTokenFile{path, err.Error()}
	}
	if saved.Server != server || saved.Fingerprint != fingerprint || saved.DeviceToken == "" || saved.WSURL == "" {
		return saved, false, nil
	}
	if why := checkSavedPhone(saved); why != "" {
		return saved, false, &damagedTokenFile{path, why}
	}
	return saved, true, nil
}

// checkSavedPhone says what is wrong with a token file's registration, ""
// when nothing: its token must be a device token (dt_ and base64url) and
// its link address a ws:// or wss:// URL, as registration hands them out.
func checkSavedPhone(s savedPhone) string {
	tok, ok := strings.CutPrefix(s.DeviceToken, device.TokenPrefix)
	if !ok || tok == "" || len(tok) > 256 || strings.ContainsFunc(tok, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) {
		return "its device_token is not a device token"
	}
	u, err := url.Parse(s.WSURL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return "its ws_url is not a ws:// or wss:// URL"
	}
	return ""
}

// savePhoneToken writes the token file readable by its owner only (the
// token is a password), replacing any earlier one in one step.
func savePhoneToken(path string, saved savedPhone) error {
	data, err := json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".phone-token-*")
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up after a failure
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("token file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	// CreateTemp makes the file 0600 already; say so for the reader.
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	return nil
}
