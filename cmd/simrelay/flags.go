package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
)

// envName is the environment twin of a flag: --data-dir is SIMRELAY_DATA_DIR.
func envName(flagName string) string {
	return "SIMRELAY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// both names a setting in its two spellings, for error messages.
func both(flagName string) string { return "--" + flagName + " (" + envName(flagName) + ")" }

// parseFlags parses args, then fills every flag not given on the command line
// from its environment twin. A bad value names both spellings. Positional
// arguments are allowed up to maxArgs and left in fs.Args().
func parseFlags(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > maxArgs {
		return fmt.Errorf("unexpected argument %q", fs.Arg(maxArgs))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %v", envName(f.Name), v, e)
			}
		}
	})
	return err
}

// flagUsage prints a flag set's flags with their environment twins.
func flagUsage(fs *flag.FlagSet, intro string) func() {
	return func() {
		out := fs.Output()
		fmt.Fprint(out, intro)
		fs.VisitAll(func(f *flag.Flag) {
			def := ""
			if f.DefValue != "" {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
			fmt.Fprintf(out, "  --%s  [%s]%s\n      %s\n", f.Name, envName(f.Name), def, f.Usage)
		})
	}
}

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
