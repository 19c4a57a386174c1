package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/egress"
	"github.com/simrelay/simrelay/internal/redact"
)

// DefaultMediaMaxBytes caps a media download: WhatsApp itself refuses
// videos over 16 MB and documents over 100 MB; 64 MB keeps a phone's or a
// Mac's memory safe while covering what people send.
const DefaultMediaMaxBytes = 64 << 20

// DefaultMediaTimeout bounds a media download, so one slow server cannot
// hold the executor (and every job behind it) for long.
const DefaultMediaTimeout = 60 * time.Second

// MediaFetcher downloads a job's media_url (PROTOCOL.md 16.2): https only,
// from public addresses only, at most MaxBytes, within Timeout. Its errors
// are what the job's failed report says: media_unavailable.
//
// A media_url is a customer's word, and the agent runs inside someone's
// network: without the address rule a member could have it fetch an
// internal https service (a router, a NAS, a cloud metadata endpoint) and
// send the answer to any recipient. So every connection, redirects
// included, is checked on the address dialled, after DNS
// (internal/egress), and no proxy is used, since a proxy would dial past
// the check.
type MediaFetcher struct {
	// Dialer connects to media servers (nil: a net.Dialer with a 30 s
	// timeout). A copy is used, its Control replaced by the address check.
	Dialer *net.Dialer
	// RootCAs verifies the servers' certificates (nil: the system's roots).
	RootCAs *x509.CertPool
	// AllowPrivate lifts the address rule (--media-allow-private): for a
	// self-hoster whose media is on their own network, and for tests. The
	// proxy of HTTPS_PROXY is then used too.
	AllowPrivate bool
	MaxBytes     int64
	Timeout      time.Duration
}

// Media is a downloaded file.
type Media struct {
	Data []byte
	// MIME is the server's Content-Type without parameters
	// ("application/octet-stream" when it sent none).
	MIME string
	// Name is the last element of the URL's path, for documents, as a
	// file name any file system takes (fileName).
	Name string
}

// ErrMediaUnavailable wraps every download failure.
var ErrMediaUnavailable = errors.New("media_unavailable")

// Fetch downloads raw.
func (f MediaFetcher) Fetch(ctx context.Context, raw string) (Media, error) {
	fail := func(format string, a ...any) (Media, error) {
		return Media{}, fmt.Errorf("%w: %s", ErrMediaUnavailable, fmt.Sprintf(format, a...))
	}
	// The link as errors show it: a media_url may be a signed link whose
	// key is in its query, or carry a user and password. The server
	// refuses credentials, but the agent does not count on it.
	link := redact.Link(raw)
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fail("media_url %q: only https URLs are downloaded", link)
	}
	max, timeout := f.MaxBytes, f.Timeout
	if max <= 0 {
		max = DefaultMediaMaxBytes
	}
	if timeout <= 0 {
		timeout = DefaultMediaTimeout
	}
	c := f.client(timeout)
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return fail("%v", maskLink(err))
	}
	res, err := c.Do(req)
	if err != nil {
		var ae *egress.AddressError
		if errors.As(err, &ae) {
			return Media{}, fmt.Errorf("%w: GET %s: the host resolves to %s, not downloaded (allowed only with --media-allow-private): %w",
				ErrMediaUnavailable, link, egress.Described(ae.Range), ae)
		}
		return fail("%v", maskLink(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fail("GET %s: %s", link, res.Status)
	}
	if res.ContentLength > max {
		return fail("GET %s: %d bytes, more than the %d allowed", link, res.ContentLength, max)
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	if err != nil {
		return fail("GET %s: %v", link, err)
	}
	if int64(len(data)) > max {
		return fail("GET %s: more than the %d bytes allowed", link, max)
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if mt == "" {
		mt = "application/octet-stream"
	}
	return Media{Data: data, MIME: mt, Name: fileName(u.Path[strings.LastIndex(u.Path, "/")+1:])}, nil
}

// maxFileName is the most bytes a file name holds on macOS (APFS) and
// Linux (ext4), where the imessage transport writes the file under Name.
const maxFileName = 255

// fileName makes the last element of a media_url's path a file name: one
// that names no directory ("", ".", ".." are "file"), holds no NUL (such a
// name is "file" with its extension), is UTF-8 (APFS takes nothing else;
// a byte that is not becomes "_"), and is at most maxFileName bytes (its
// stem cut on a character boundary, its extension kept). Any of these
// failed the imessage transport's write, and with it the send.
func fileName(name string) string {
	name = strings.ToValidUTF8(name, "_")
	ext := path.Ext(name)
	if ext == "." || len(ext) > 32 || strings.ContainsRune(ext, 0) {
		ext = ""
	}
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, 0) {
		return "file" + ext
	}
	if len(name) > maxFileName {
		return proto.CutBytes(strings.TrimSuffix(name, ext), maxFileName-len(ext)) + ext
	}
	return name
}

// maskLink masks the link a *url.Error names: net/http's masks only a
// password, and after a redirect it names the redirect's link.
func maskLink(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redact.Link(ue.URL)
	}
	return err
}

// client is the HTTP client of one download: its own transport (media
// downloads are rare; nothing is kept between them), the address rule on
// its dialer unless AllowPrivate, and redirects followed only to https.
func (f MediaFetcher) client(timeout time.Duration) *http.Client {
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if f.Dialer != nil {
		d = *f.Dialer
	}
	tr := &http.Transport{
		TLSClientConfig:       &tls.Config{RootCAs: f.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		ForceAttemptHTTP2:     true,
	}
	if f.AllowPrivate {
		tr.Proxy = http.ProxyFromEnvironment
	} else {
		d.Control, d.ControlContext = egress.Control, nil // ControlContext would take precedence
	}
	tr.DialContext = d.DialContext
	return &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		// A redirect to http would undo the https rule.
		if req.URL.Scheme != "https" {
			return errors.New("redirect away from https")
		}
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		return nil
	}}
}
