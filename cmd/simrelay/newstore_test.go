package main

import (
	"strings"
	"testing"

	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
)

// A server given a --data-dir with no store (a typo, a unit file's other
// working directory) started on a new, empty one without a word: every API
// key answered 401 and the log said nothing but where the store was. Its
// start says a new store was made, once: not at the next start.
func TestServeSaysItMadeANewStore(t *testing.T) {
	storetest.EmbeddedOnly(t, "the embedded store's file in --data-dir")
	t.Parallel()
	bin := buildBinary(t)
	st := testStore{dir: t.TempDir()}
	const said = "a new, empty store was made: the data dir held none"
	first := startServer(t, bin, st)
	// Its stderr is read apart from the listening line: its own line, logged after this one, ends the wait.
	poll.Until(t, "the first start's listening line in its log", func() bool { return strings.Contains(first.stderr.String(), "simrelay listening") })
	if !strings.Contains(first.stderr.String(), said) || !strings.Contains(first.stderr.String(), "data_dir="+st.dir) {
		t.Errorf("a first start's log does not say it made a new store in %s:\n%s", st.dir, first.stderr.String())
	}
	_ = first.cmd.Process.Kill()
	_ = first.cmd.Wait()
	second := startServer(t, bin, st)
	poll.Until(t, "the second start's listening line in its log", func() bool { return strings.Contains(second.stderr.String(), "simrelay listening") })
	if strings.Contains(second.stderr.String(), said) {
		t.Errorf("a start on a store already there says it made a new one:\n%s", second.stderr.String())
	}
}
