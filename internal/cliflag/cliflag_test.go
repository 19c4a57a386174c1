package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

const testEnv = Env("CLIFLAG_TEST_")

type settings struct {
	name    string
	count   int
	wait    time.Duration
	verbose bool
}

func newSet(s *settings) *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.StringVar(&s.name, "name", "ana", "who")
	fs.IntVar(&s.count, "count", 1, "how many")
	fs.DurationVar(&s.wait, "max-wait", time.Second, "how long")
	fs.BoolVar(&s.verbose, "verbose", false, "say more")
	return fs
}

func TestNames(t *testing.T) {
	if got, want := testEnv.Name("max-wait"), "CLIFLAG_TEST_MAX_WAIT"; got != want {
		t.Errorf("Name: got %q, want %q", got, want)
	}
	if got, want := testEnv.Both("max-wait"), "--max-wait (CLIFLAG_TEST_MAX_WAIT)"; got != want {
		t.Errorf("Both: got %q, want %q", got, want)
	}
}

// Flags read in either spelling and in any place; the environment fills
// what the command line leaves out, and the command line wins.
func TestParse(t *testing.T) {
	t.Setenv("CLIFLAG_TEST_COUNT", "7")
	t.Setenv("CLIFLAG_TEST_NAME", "from-env")
	var s settings
	fs := newSet(&s)
	if err := testEnv.Parse(fs, []string{"FILE", "--name", "bo", "-max-wait=2m", "--verbose"}, 1); err != nil {
		t.Fatal(err)
	}
	want := settings{name: "bo", count: 7, wait: 2 * time.Minute, verbose: true}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
	if got := fs.Args(); len(got) != 1 || got[0] != "FILE" {
		t.Errorf("positional arguments: got %q, want [FILE]", got)
	}
	var rest settings
	if err := testEnv.Parse(newSet(&rest), []string{"--", "--name"}, 1); err != nil || rest.name != "from-env" {
		t.Errorf("after --: got %+v, %v; want --name taken as an argument", rest, err)
	}
}

// Every refusal says what is wrong and where: the word, the flag in both
// spellings, what it wants.
func TestParseRefusals(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"stray", "--count", "2"}, nil, `unexpected argument "stray" (-h lists the flags)`},
		{[]string{"--count", "2", "stray"}, nil, `unexpected argument "stray"`},
		{[]string{"--count", "many"}, nil, `--count (CLIFLAG_TEST_COUNT) "many": wants a whole number`},
		{[]string{"--max-wait", "15"}, nil, `--max-wait (CLIFLAG_TEST_MAX_WAIT) "15": wants a duration such as 15s or 2m`},
		{[]string{"--verbose", "true"}, nil, `--verbose takes its value after '=': --verbose=true`},
		{[]string{"--bogus"}, nil, `flag provided but not defined: -bogus (-h lists the flags)`},
		{[]string{"--name"}, nil, `--name needs a value (-h lists the flags)`},
		{nil, map[string]string{"CLIFLAG_TEST_VERBOSE": "yes"}, `CLIFLAG_TEST_VERBOSE="yes": --verbose wants true or false (or 1 or 0)`},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var s settings
			err := testEnv.Parse(newSet(&s), c.args, 0)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// -h prints every flag with its twin and default, in the --flag spelling.
func TestUsage(t *testing.T) {
	t.Parallel()
	var s settings
	fs := newSet(&s)
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage = testEnv.Usage(fs, "Usage: test [flags]\n\n")
	if err := testEnv.Parse(fs, []string{"-h"}, 0); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("got %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage: test [flags]\n\n", "  --max-wait  [CLIFLAG_TEST_MAX_WAIT] (default \"1s\")\n      how long\n", "  --verbose  [CLIFLAG_TEST_VERBOSE] (default \"false\")\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage %q lacks %q", out.String(), want)
		}
	}
}
