package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// An admin create-company refused for its input (a bad e-mail, a weak
// password, no company name) creates nothing: it opened the store first,
// which made the data directory and its file (or simrelay's schema in an
// empty PostgreSQL database), and then refused, leaving a store behind that
// the operator never asked for. The real binary is run, as the README runs it.
func TestAdminCreateCompanyRefusedLeavesNoStore(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{"bad e-mail", []string{"--company", "Acme", "--email", "not-an-email", "--password", "Change-me-123"}, "--email"},
		{"weak password", []string{"--company", "Acme", "--email", "you@example.com", "--password", "weak"}, "--password"},
		{"empty company", []string{"--company", " ", "--email", "you@example.com", "--password", "Change-me-123"}, "--company"},
		{"no flags", nil, "--company"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newTestStore(t)
			st.dir = filepath.Join(st.dir, "data") // not there yet: the command would make it
			var before string
			if st.databaseURL != "" {
				before = pgObjects(t, st.databaseURL)
			}
			cmd := exec.Command(bin, append(append([]string{"admin", "create-company"}, tc.args...), st.args()...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), tc.flag) {
				t.Fatalf("got %v %q, want exit 2 naming %s", err, stderr.String(), tc.flag)
			}
			if _, err := os.Stat(st.dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused command left the data directory %s (%v)", st.dir, err)
			}
			if st.databaseURL != "" {
				if after := pgObjects(t, st.databaseURL); after != before {
					t.Fatalf("the refused command changed the database:\nbefore %s\nafter  %s", before, after)
				}
			}
		})
	}
}
