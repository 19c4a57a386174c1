package webhook

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrForbiddenAddress is the cause of a connection the client refused
// because the address is not public.
var ErrForbiddenAddress = errors.New("webhook: address is not public")

// AddressError names the refused address and its range.
type AddressError struct {
	Addr  netip.Addr
	Range string
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("refused to connect to %s: %s address (allowed only with --webhook-allow-private)", e.Addr, e.Range)
}

// Public is the error as a customer sees it in the deliveries log: the
// range, not the address, so the log cannot map the server's internal names.
func (e *AddressError) Public() string {
	return fmt.Sprintf("refused to connect: the host resolves to a %s address (allowed only with --webhook-allow-private)", e.Range)
}

// Is makes errors.Is(err, ErrForbiddenAddress) hold.
func (e *AddressError) Is(target error) bool { return target == ErrForbiddenAddress }

// nonPublic lists the ranges a webhook must not reach unless private
// addresses are allowed: everything that is not a unicast address on the
// public Internet. IPv4-mapped IPv6 addresses are unmapped before the check,
// and NAT64 and 6to4 addresses are checked by the IPv4 address they carry.
var nonPublic = []struct {
	prefix netip.Prefix
	name   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "protocol-assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// NonPublic reports whether a is outside the public unicast Internet, and
// names its range.
func NonPublic(a netip.Addr) (string, bool) {
	a = a.Unmap().WithZone("")
	if !a.IsValid() {
		return "invalid", true
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			if name, bad := NonPublic(netip.AddrFrom4([4]byte(b[12:16]))); bad {
				return "NAT64 " + name, true
			}
		case sixToFour.Contains(a):
			if name, bad := NonPublic(netip.AddrFrom4([4]byte(b[2:6]))); bad {
				return "6to4 " + name, true
			}
		}
	}
	for _, r := range nonPublic {
		if r.prefix.Contains(a) {
			return r.name, true
		}
	}
	return "", false
}

// dialControl refuses a connection to a non-public address. It runs on the
// address being dialled, after DNS resolution, so a name that resolves or
// rebinds to an internal address is refused too.
func dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook: unexpected dial address %q: %w", address, err)
	}
	if name, bad := NonPublic(ap.Addr()); bad {
		return &AddressError{Addr: ap.Addr().Unmap().WithZone(""), Range: name}
	}
	return nil
}

// NewClient returns the HTTP client deliveries go through: no proxy (a proxy
// would dial for us, past the address check), non-public addresses refused
// at connect time unless cfg.AllowPrivate, TLS verified (against cfg.RootCAs
// when set), redirects not followed, and each request bounded by cfg.Timeout.
func NewClient(cfg Config) *http.Client {
	cfg = cfg.withDefaults()
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = dialControl
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    cfg.Timeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    cfg.Workers,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: maxResponseBytes,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   cfg.Timeout,
		// A redirect is an answer, not an instruction: following it would let a
		// receiver point us anywhere, and the contract counts it as a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
