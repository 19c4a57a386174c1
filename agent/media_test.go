package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/egress"
)

// A media_url is a customer's word: the fetcher refuses every non-public
// address at connect time, after DNS (localhost resolves to loopback), so
// the loopback server gets no request; only AllowPrivate reaches it. Only
// loopback forms are tried here, so that even a fetcher without the rule
// reaches nothing beyond this machine; internal/egress's tests cover the
// other ranges.
func TestMediaFetchRefusesNonPublicAddresses(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	media := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte("PNGDATA"))
	}))
	defer media.Close()
	roots := x509.NewCertPool()
	roots.AddCert(media.Certificate())
	port := media.URL[strings.LastIndex(media.URL, ":")+1:]

	f := MediaFetcher{RootCAs: roots, Timeout: 10 * time.Second}
	for _, u := range []string{
		media.URL + "/label.png",
		"https://localhost:" + port + "/label.png",
		"https://[::ffff:127.0.0.1]:" + port + "/label.png",
		"https://[::1]:" + port + "/label.png",
		"https://0.0.0.0:" + port + "/label.png",
	} {
		m, err := f.Fetch(context.Background(), u)
		if !errors.Is(err, ErrMediaUnavailable) || !errors.Is(err, egress.ErrNonPublic) || !strings.Contains(err.Error(), "--media-allow-private") {
			t.Errorf("%s: got %d bytes, %v; want media_unavailable for a non-public address, naming --media-allow-private", u, len(m.Data), err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback media server got %d requests, want 0", n)
	}

	f.AllowPrivate = true
	m, err := f.Fetch(context.Background(), media.URL+"/label.png")
	if err != nil || string(m.Data) != "PNGDATA" || m.MIME != "image/png" || m.Name != "label.png" {
		t.Fatalf("with AllowPrivate: got %+v %v, want the file", m, err)
	}
}

// A media_url may be a signed link whose key is in its query, or carry a
// user and password (the server refuses those, but the agent does not count
// on it): no error of a download shows them, whether the link is refused
// before a request, its address refused at connect time, the TLS handshake
// fails, or a redirect (whose link net/http's error names) is refused.
func TestMediaFetchErrorsMaskTheLink(t *testing.T) {
	t.Parallel()
	media := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://cdn.example.com/next.png?sig=s3cret-redirect", http.StatusFound)
	}))
	media.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	media.StartTLS()
	defer media.Close()
	roots := x509.NewCertPool()
	roots.AddCert(media.Certificate())
	host := strings.TrimPrefix(media.URL, "https://")
	signed := "https://user:s3cret-password@" + host + "/label.png?X-Amz-Signature=s3cret-query&X-Amz-Expires=60#s3cret-fragment"

	for _, c := range []struct {
		name  string
		f     MediaFetcher
		url   string
		shows string // the host the error names
	}{
		{"not https", MediaFetcher{}, strings.Replace(signed, "https:", "http:", 1), host},
		{"a loopback address", MediaFetcher{RootCAs: roots, Timeout: 10 * time.Second}, signed, host},
		{"an unknown certificate", MediaFetcher{AllowPrivate: true, Timeout: 10 * time.Second}, signed, host},
		{"a redirect to http", MediaFetcher{AllowPrivate: true, RootCAs: roots, Timeout: 10 * time.Second}, signed, "cdn.example.com"},
	} {
		_, err := c.f.Fetch(context.Background(), c.url)
		if !errors.Is(err, ErrMediaUnavailable) {
			t.Errorf("%s: got %v, want media_unavailable", c.name, err)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "s3cret") || !strings.Contains(msg, c.shows) {
			t.Errorf("%s: the error %q shows a secret of the link, or not its host %s", c.name, msg, c.shows)
		}
	}
}
