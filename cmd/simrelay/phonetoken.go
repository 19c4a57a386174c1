package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/simrelay/simrelay/android-protocol/client"
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
	if err := notAFile(path); err != nil {
		return saved, false, err
	}
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
	if why := (client.Registration{DeviceToken: saved.DeviceToken, WSURL: saved.WSURL}).Problem(); why != "" {
		return saved, false, &damagedTokenFile{path, why}
	}
	return saved, true, nil
}

// notAFile refuses a token file that is there and is no file (a
// directory, FIFO, device or socket): it is neither read (opening a FIFO
// waits for a writer, and the phone hung there, deaf to SIGTERM) nor
// replaced by the saved token.
func notAFile(path string) error {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("token file %s is not a regular file: name a file to keep the device token in", path)
	}
	return nil
}

// savePhoneToken writes the token file readable by its owner only (the
// token is a password), replacing any earlier one in one step.
func savePhoneToken(path string, saved savedPhone) error {
	if err := notAFile(path); err != nil {
		return err
	}
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
