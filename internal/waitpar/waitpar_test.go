package waitpar

import (
	"flag"
	"runtime"
	"strconv"
	"testing"
)

// Default raises -test.parallel only where the command line left it unset.
// (m.Run has parsed the command line before this runs.)
func TestDefault(t *testing.T) {
	f := flag.Lookup("test.parallel")
	before := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.parallel", before) })
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })

	Default(3)
	want := strconv.Itoa(3 * runtime.GOMAXPROCS(0))
	if explicit {
		want = before
	}
	if got := f.Value.String(); got != want {
		t.Fatalf("-test.parallel %s after Default(3) (given on the command line: %v), want %s", got, explicit, want)
	}
}

// AtLeast raises -test.parallel to n only where GOMAXPROCS is lower and
// the command line left it unset.
func TestAtLeast(t *testing.T) {
	f := flag.Lookup("test.parallel")
	before := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.parallel", before) })
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })

	n := runtime.GOMAXPROCS(0) + 3
	AtLeast(n)
	want := strconv.Itoa(n)
	if explicit {
		want = before
	}
	if got := f.Value.String(); got != want {
		t.Fatalf("-test.parallel %s after AtLeast(%d) (given on the command line: %v), want %s", got, n, explicit, want)
	}

	_ = flag.Set("test.parallel", before)
	AtLeast(runtime.GOMAXPROCS(0))
	if got := f.Value.String(); got != before {
		t.Fatalf("-test.parallel %s after AtLeast(GOMAXPROCS), want it left at %s", got, before)
	}
}
