package main

import (
	"flag"
	"fmt"
	"net"
	"strings"

	"github.com/simrelay/simrelay/internal/cliflag"
)

// envTwins is the prefix of simrelay's environment twins: --data-dir is SIMRELAY_DATA_DIR.
const envTwins = cliflag.Env("SIMRELAY_")

// both names a setting in its two spellings, for error messages.
func both(flagName string) string { return envTwins.Both(flagName) }

// parseFlags reads a command's flags and their environment twins (cliflag.Env.Parse).
func parseFlags(fs *flag.FlagSet, args []string, maxArgs int) error {
	return envTwins.Parse(fs, args, maxArgs)
}

// addDatabaseURL defines --database-url on a command that works on the store.
func addDatabaseURL(fs *flag.FlagSet) *cliflag.DatabaseURL { return cliflag.AddDatabaseURL(fs, "") }

// flagUsage prints a flag set's flags with their environment twins.
func flagUsage(fs *flag.FlagSet, intro string) func() { return envTwins.Usage(fs, intro) }

// cidrList is a comma-separated list of networks or single addresses.
type cidrList []*net.IPNet

func (l *cidrList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = n.String()
	}
	return strings.Join(parts, ",")
}

func (l *cidrList) Set(s string) error {
	*l = nil
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			ip := net.ParseIP(part)
			if ip == nil {
				return fmt.Errorf("%q is not an IP address or CIDR network", part)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			*l = append(*l, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(part)
		if err != nil {
			return fmt.Errorf("%q is not an IP address or CIDR network", part)
		}
		*l = append(*l, n)
	}
	return nil
}
