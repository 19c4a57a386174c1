package agent

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/durable"
)

// ConfigFile is what pairing leaves on disk: the device token is a password
// (PROTOCOL.md section 4.7), so the file is written with mode 0600 and never
// logged.
type ConfigFile struct {
	Server            string `json:"server"`
	WSURL             string `json:"ws_url"`
	DeviceToken       string `json:"device_token"`
	DeviceFingerprint string `json:"device_fingerprint"`
	DeviceName        string `json:"device_name,omitempty"`
	// Salt prefixes every client_id this install makes (PROTOCOL.md 10.2).
	Salt string `json:"salt"`
}

// JournalPath is the journal file next to the configuration file.
func JournalPath(configPath string) string {
	return strings.TrimSuffix(configPath, filepath.Ext(configPath)) + ".journal.db"
}

// maxConfigFile bounds what is read of the configuration: pairing writes
// a few hundred bytes, so a longer file is no configuration, and a huge
// one is not read into memory whole.
const maxConfigFile = 64 << 10

// LoadConfig reads the file written by pairing. A file that cannot be
// used (torn, not JSON, a token or link address that pairing never
// writes) is refused at once, naming the damage, rather than the link
// being retried forever with a request that cannot be made.
func LoadConfig(path string) (ConfigFile, error) {
	var c ConfigFile
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, fmt.Errorf("no configuration at %s: pair the agent first (simrelay-agent pair --server URL --code CODE)", path)
	}
	if err != nil {
		return c, fmt.Errorf("read configuration: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return c, fmt.Errorf("read configuration: %w", err)
	}
	damaged := func(why string) error {
		return fmt.Errorf("configuration %s is damaged (%s): pair the agent again (simrelay-agent pair --server URL --code CODE)", path, why)
	}
	if len(data) > maxConfigFile {
		return c, damaged(fmt.Sprintf("over %d KiB", maxConfigFile>>10))
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, damaged(err.Error())
	}
	if c.DeviceToken == "" || c.WSURL == "" {
		return c, fmt.Errorf("configuration %s holds no device token: pair the agent again", path)
	}
	if why := (client.Registration{DeviceToken: c.DeviceToken, WSURL: c.WSURL}).Problem(); why != "" {
		return c, damaged(why)
	}
	return c, nil
}

// SaveConfig writes the file atomically with mode 0600.
func SaveConfig(path string, c ConfigFile) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("configuration directory: %w", err)
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".agent-config-*")
	if err != nil {
		return fmt.Errorf("write configuration: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write configuration: %w", err)
	}
	// The new name survives a power loss only once its directory is
	// synced: pairing's device token would be lost, and the phone paired
	// again. Where a directory cannot be synced (Windows), the rename is
	// what the system gives.
	if err := durable.SyncDir(filepath.Dir(path)); err != nil && runtime.GOOS != "windows" {
		return fmt.Errorf("write configuration: %w", err)
	}
	return nil
}

// NewSalt is a random per-install prefix of client ids.
func NewSalt() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ParsePairingURI reads simrelay://pair?server=...&code=... (PROTOCOL.md 4.4).
func ParsePairingURI(uri string) (server, code string, err error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "simrelay" || u.Host != "pair" {
		return "", "", fmt.Errorf("pairing URI %q: want the form simrelay://pair?server=URL&code=CODE (the QR code's)", uri)
	}
	q := u.Query()
	server, code = strings.TrimRight(q.Get("server"), "/"), q.Get("code")
	if server == "" || code == "" {
		return "", "", fmt.Errorf("pairing URI %q: server and code are both needed", uri)
	}
	return server, code, nil
}

// CheckServerURL refuses a server that is not https unless allowHTTP
// (PROTOCOL.md 4.4: http is for local testing only).
func CheckServerURL(server string, allowHTTP bool) error {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("server %q: want an absolute URL such as https://sms.example.com", server)
	}
	if u.Scheme == "http" && !allowHTTP {
		return fmt.Errorf("server %q is not https: the device token would travel in clear text; use --allow-http for a local test server only", server)
	}
	return nil
}
