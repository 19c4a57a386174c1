// Package cliflag reads the command lines of the project's binaries, simrelay
// and simrelay-agent, one way: flags spelled --flag, each with an environment
// twin, flags after positional arguments still read, a stray word refused by
// name, and a refused value named in both spellings with what the flag wants.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Env is the prefix of a binary's environment twins: with Env("SIMRELAY_"),
// --data-dir is SIMRELAY_DATA_DIR.
type Env string

// Name is the environment twin of a flag.
func (e Env) Name(flagName string) string {
	return string(e) + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Both names a setting in its two spellings, for error messages:
// --data-dir (SIMRELAY_DATA_DIR).
func (e Env) Both(flagName string) string { return "--" + flagName + " (" + e.Name(flagName) + ")" }

// Parse parses args, then fills every flag not given on the command line
// from its environment twin. A bad value names both spellings and says what
// the flag wants; the caller prints the error, once (the flag package's own
// printing is silenced). Flags may come after positional arguments too
// (`--inbound FROM TEXT --inbound-to N`). -h prints the usage and answers
// flag.ErrHelp. Positional arguments are allowed up to maxArgs and left in
// fs.Args(); one more is refused by name.
func (e Env) Parse(fs *flag.FlagSet, args []string, maxArgs int) error {
	var bad *badValue
	fs.VisitAll(func(f *flag.Flag) { f.Value = &described{Value: f.Value, name: f.Name, bad: &bad} })
	args, err := flagsFirst(fs, args)
	if err != nil {
		return err
	}
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err = fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	case err != nil && bad != nil:
		return fmt.Errorf("%s %q: %s", e.Both(bad.name), bad.value, bad.want)
	case err != nil:
		// Unknown flag or missing value: the flag package's words, with a pointer to the list.
		return fmt.Errorf("%v (-h lists the flags)", err)
	}
	if fs.NArg() > maxArgs {
		return fmt.Errorf("unexpected argument %q (-h lists the flags)", fs.Arg(maxArgs))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		if v, ok := os.LookupEnv(e.Name(f.Name)); ok {
			if fs.Set(f.Name, v) != nil && bad != nil {
				err = fmt.Errorf("%s=%q: --%s %s", e.Name(f.Name), bad.value, f.Name, bad.want)
			}
		}
	})
	return err
}

// Usage prints intro, then a flag set's flags with their environment twins:
//
//	--data-dir  [SIMRELAY_DATA_DIR] (default "./data")
//	    directory of the embedded store
func (e Env) Usage(fs *flag.FlagSet, intro string) func() {
	return func() {
		out := fs.Output()
		fmt.Fprint(out, intro)
		fs.VisitAll(func(f *flag.Flag) {
			def := ""
			if f.DefValue != "" {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
			fmt.Fprintf(out, "  --%s  [%s]%s\n      %s\n", f.Name, e.Name(f.Name), def, f.Usage)
		})
	}
}

// badValue is the value a flag refused and what the flag wants instead.
type badValue struct{ name, value, want string }

// described wraps a flag's value so that a refused value is recorded with a
// sentence saying what the flag wants, instead of strconv's "parse error".
type described struct {
	flag.Value
	name string
	bad  **badValue
}

func (d *described) Set(s string) error {
	err := d.Value.Set(s)
	if err != nil {
		shown := s
		// A value that may hold a secret (a URL's password) says how to mask it.
		if r, ok := d.Value.(interface{ Redact(string) string }); ok {
			shown = r.Redact(s)
		}
		*d.bad = &badValue{name: d.name, value: shown, want: wants(d.Value, err)}
	}
	return err
}

// String is safe on the zero value, which the flag package's default usage makes.
func (d *described) String() string {
	if d.Value == nil {
		return ""
	}
	return d.Value.String()
}

// IsBoolFlag keeps --flag (without a value) working for boolean flags.
func (d *described) IsBoolFlag() bool {
	b, ok := d.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// wants says what kind of value a flag takes; a flag type of our own says it in its error.
func wants(v flag.Value, err error) string {
	g, ok := v.(flag.Getter)
	if !ok {
		return err.Error()
	}
	switch g.Get().(type) {
	case bool:
		return "wants true or false (or 1 or 0)"
	case time.Duration:
		return "wants a duration such as 15s or 2m"
	case int, int64:
		return "wants a whole number"
	case uint, uint64:
		return "wants a whole number, 0 or more"
	case float64:
		return "wants a number"
	}
	return err.Error()
}

// flagsFirst puts the flags of args before its positional arguments, ending
// them with "--", so that a flag given after an argument is still a flag.
// A boolean flag takes its value only with "=": a true/false/1/0 right
// after one is refused with that said, rather than taken for an argument.
func flagsFirst(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // the flag package names it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			if i+1 < len(args) && isBoolWord(args[i+1]) {
				return nil, fmt.Errorf("--%s takes its value after '=': --%s=%s", name, name, args[i+1])
			}
			continue
		}
		if i+1 == len(args) {
			// Otherwise the flag package would take the "--" added below for its value.
			return nil, fmt.Errorf("--%s needs a value (-h lists the flags)", name)
		}
		i++
		flags = append(flags, args[i])
	}
	return append(append(flags, "--"), positional...), nil
}

func isBoolWord(v string) bool {
	switch strings.ToLower(v) {
	case "true", "false", "1", "0", "t", "f":
		return true
	}
	return false
}
