package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultMediaMaxBytes caps a media download: WhatsApp itself refuses
// videos over 16 MB and documents over 100 MB; 64 MB keeps a phone's or a
// Mac's memory safe while covering what people send.
const DefaultMediaMaxBytes = 64 << 20

// DefaultMediaTimeout bounds a media download, so one slow server cannot
// hold the executor (and every job behind it) for long.
const DefaultMediaTimeout = 60 * time.Second

// MediaFetcher downloads a job's media_url (PROTOCOL.md 16.2): https only,
// at most MaxBytes, within Timeout. Its errors are what the job's failed
// report says: media_unavailable.
type MediaFetcher struct {
	Client   *http.Client
	MaxBytes int64
	Timeout  time.Duration
}

// Media is a downloaded file.
type Media struct {
	Data []byte
	// MIME is the server's Content-Type without parameters
	// ("application/octet-stream" when it sent none).
	MIME string
	// Name is the last element of the URL's path, for documents.
	Name string
}

// ErrMediaUnavailable wraps every download failure.
var ErrMediaUnavailable = errors.New("media_unavailable")

// Fetch downloads raw.
func (f MediaFetcher) Fetch(ctx context.Context, raw string) (Media, error) {
	fail := func(format string, a ...any) (Media, error) {
		return Media{}, fmt.Errorf("%w: %s", ErrMediaUnavailable, fmt.Sprintf(format, a...))
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fail("media_url %q: only https URLs are downloaded", raw)
	}
	max, timeout, client := f.MaxBytes, f.Timeout, f.Client
	if max <= 0 {
		max = DefaultMediaMaxBytes
	}
	if timeout <= 0 {
		timeout = DefaultMediaTimeout
	}
	if client == nil {
		client = http.DefaultClient
	}
	// A redirect to http would undo the https rule.
	c := *client
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" {
			return errors.New("redirect away from https")
		}
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return fail("%v", err)
	}
	res, err := c.Do(req)
	if err != nil {
		return fail("%v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fail("GET %s: %s", u.Redacted(), res.Status)
	}
	if res.ContentLength > max {
		return fail("GET %s: %d bytes, more than the %d allowed", u.Redacted(), res.ContentLength, max)
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	if err != nil {
		return fail("GET %s: %v", u.Redacted(), err)
	}
	if int64(len(data)) > max {
		return fail("GET %s: more than the %d bytes allowed", u.Redacted(), max)
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if mt == "" {
		mt = "application/octet-stream"
	}
	name := u.Path[strings.LastIndex(u.Path, "/")+1:]
	if name == "" {
		name = "file"
	}
	return Media{Data: data, MIME: mt, Name: name}, nil
}
