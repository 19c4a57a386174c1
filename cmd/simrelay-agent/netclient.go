package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// httpClient is the agent's client for the server (pairing and the link).
func httpClient(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = newDialer().DialContext
	return &http.Client{Transport: tr, Timeout: timeout}
}

// newDialer is the agent's dialer, for the server and for media downloads.
// Android has no /etc/resolv.conf, so Go's resolver would ask 127.0.0.1
// for every name and fail; under Termux the agent asks the name servers of
// $PREFIX/etc/resolv.conf (Termux's own copy) instead.
func newDialer() *net.Dialer {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if servers := termuxNameservers(); len(servers) > 0 {
		dialer.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			var err error
			for _, s := range servers {
				var c net.Conn
				if c, err = d.DialContext(ctx, network, net.JoinHostPort(s, "53")); err == nil {
					return c, nil
				}
			}
			return nil, err
		}}
	}
	return dialer
}

// termuxNameservers reads Termux's resolv.conf when the system has none.
func termuxNameservers() []string {
	if _, err := os.Stat("/etc/resolv.conf"); err == nil {
		return nil
	}
	prefix := os.Getenv("PREFIX")
	if prefix == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(prefix, "etc", "resolv.conf"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			out = append(out, fields[1])
		}
	}
	return out
}
