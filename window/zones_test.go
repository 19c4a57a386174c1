package window

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simrelay/simrelay/problem"
)

// TestZoneNamesAreTheEmbeddedDatabase: a window's time zone is a name of the
// zone database built into the binary, and nothing else a host's
// /usr/share/zoneinfo holds: time.LoadLocation reads the host's files
// first, so "./UTC", "America//New_York", "localtime" (the host's own zone),
// "posixrules" and the leap-second "right/" zones used to be accepted on a
// Debian host, and on a host without those files (a distroless container,
// another node of the cluster) the stored window then failed to load and
// was taken as always open. Every spelling of a path was also a new entry
// of the process's zone cache.
func TestZoneNamesAreTheEmbeddedDatabase(t *testing.T) {
	t.Parallel()
	for _, tz := range []string{"./UTC", "America//New_York", "././Europe/Berlin", "Europe/Berlin/", "localtime",
		"posixrules", "right/UTC", "posix/Europe/Berlin", "zone.tab", "utc", "europe/berlin", "Europe/Berlin\x00"} {
		w := Window{From: "09:00", To: "17:00", TimeZone: tz}
		pe, ok := problem.As(w.Validate("window"))
		if !ok || pe.Field != "window.time_zone" || pe.Code != problem.ValidationFailed {
			t.Errorf("time zone %q: got %v, want validation_failed on window.time_zone", tz, pe)
		}
	}
	for _, tz := range []string{"UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "EST", "Asia/Kolkata", "US/Pacific"} {
		if err := (Window{From: "09:00", To: "17:00", TimeZone: tz}).Validate("window"); err != nil {
			t.Errorf("time zone %q: %v", tz, err)
		}
	}
}

// TestZoneListIsTheToolchains: zoneNames is the list of the Go toolchain's
// zone database (the one time/tzdata embeds); after a Go upgrade that
// changed it, run go generate ./window.
func TestZoneListIsTheToolchains(t *testing.T) {
	t.Parallel()
	path, err := zoneinfoZip()
	if err != nil {
		t.Skipf("no Go toolchain to compare with: %v", err)
	}
	r, err := zip.OpenReader(path)
	if os.IsNotExist(err) {
		t.Skip("no zoneinfo.zip in GOROOT")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var names []string
	for _, f := range r.File {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, zoneList()) {
		t.Fatalf("zoneNames differs from %s (%d names, the list has %d): run go generate ./window", path, len(names), len(zoneList()))
	}
	for _, n := range names {
		if _, err := location(n); err != nil {
			t.Errorf("zone %q of the list does not load: %v", n, err)
		}
	}
}

// zoneinfoZip is the toolchain's zone database, the one time/tzdata embeds.
func zoneinfoZip() (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", err
	}
	return filepath.Join(strings.TrimSpace(string(out)), "lib", "time", "zoneinfo.zip"), nil
}

// TestStoredWindowOfAHostZoneKeepsItsHours: a window stored before zone
// names were held to the embedded database, with a name the host's
// zoneinfo answered (here posix/Europe/Berlin), still opens at its hours on
// that host, though a new window may no longer name that zone. Taken as
// always open, its messages went out at any hour after an upgrade.
func TestStoredWindowOfAHostZoneKeepsItsHours(t *testing.T) {
	t.Parallel()
	const tz = "posix/Europe/Berlin"
	if _, err := time.LoadLocation(tz); err != nil {
		t.Skipf("this host's zoneinfo has no %s: %v", tz, err)
	}
	w := Window{From: "09:00", To: "17:00", TimeZone: tz}
	if w.Validate("window") == nil {
		t.Fatalf("a new window in %s was accepted", tz)
	}
	night := time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC) // 03:00 in Berlin
	if got, want := w.Next(night), time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Next(%v) = %v, want %v (09:00 in Berlin)", night, got, want)
	}
	if w.Validate("window") == nil {
		t.Fatalf("a new window in %s was accepted once a stored one loaded it", tz)
	}
}
