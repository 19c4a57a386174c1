package cliflag

import (
	"fmt"
	"io"
	"runtime/debug"
	"slices"
)

// Version is the build's version: linked when set (a release's, given at
// link time with -X main.version), else the module's version, else
// devel+COMMIT from the build's VCS stamp (-dirty when built from a changed
// checkout), else devel.
func Version(linked string) string {
	if linked != "" {
		return linked
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		if info.Main.Version != "" && info.Main.Version != "(devel)" {
			return info.Main.Version
		}
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "devel+" + rev
}

// VersionCommand is a binary's version command: it prints "NAME VERSION".
// It takes no word or flag, as no other command takes a stray one: one is
// refused by name (exit 2); -h says what the command does.
func VersionCommand(name, version string, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "--help", "-help":
			fmt.Fprintf(stderr, "Usage: %s version\n\nPrints the version of this build and exits. It takes no flags.\n", name)
			return 0
		}
		fmt.Fprintf(stderr, "%s version: unexpected argument %q: it takes none\n", name, args[0])
		return 2
	}
	fmt.Fprintln(stdout, name, version)
	return 0
}

// Help answers a binary's help word (args[0]: help, -h, --help or -help):
// help COMMAND [SUB] answers as COMMAND [SUB] -h does, through run; each
// step takes one "help" off the front, so help help ends. Alone it prints
// the usage to stdout (exit 0).
func Help(args []string, usage string, stdout io.Writer, run func(args []string) int) int {
	if args[0] == "help" && len(args) > 1 {
		return run(append(slices.Clone(args[1:]), "-h"))
	}
	fmt.Fprint(stdout, usage)
	return 0
}
