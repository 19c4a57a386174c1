package main

import (
	"strings"
	"testing"
)

// Every other admin command names its database with --database-url, so an
// operator gives copy-store one too; it answered "flag provided but not
// defined: -database-url", leaving the operator to find --to in -h. It
// names --to, exit 2, nothing read.
func TestCopyStoreNamesToForADatabaseURL(t *testing.T) {
	t.Parallel()
	dir := emptyStoreDir(t)
	for _, flagArgs := range [][]string{
		{"--database-url", "postgres://simrelay@127.0.0.1:1/simrelay"},
		{"--database-url=postgres://simrelay@127.0.0.1:1/simrelay"},
		{"-database-url", "postgres://simrelay@127.0.0.1:1/simrelay"},
	} {
		code, out, errOut := runAdmin(t, append([]string{"copy-store", "--data-dir", dir}, flagArgs...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, "copy-store names the database it copies into with --to, not --database-url") {
			t.Errorf("copy-store %v: exit %d %q %q, want 2 naming --to", flagArgs, code, out, errOut)
		}
	}
}
