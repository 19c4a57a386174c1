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
