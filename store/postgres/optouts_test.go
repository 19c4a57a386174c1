package postgres

import (
	"testing"

	"github.com/simrelay/simrelay/store/conformance"
)

// TestAddOptOutRacesItsRemoval: an AddOptOut of a number already listed,
// held after its insert found the entry there, and a RemoveOptOut of that
// number that commits meanwhile. The add stores the number anew (created),
// as it would had it run after the removal: reading the entry it found, it
// read none and answered ErrNotFound, an add refused as not found.
func TestAddOptOutRacesItsRemoval(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	s := openURL(t, url, Options{})
	pause := newPauseAt("SELECT rec FROM opt_outs WHERE company_id = $1 AND phone = $2")
	held := openURL(t, url, Options{Tracer: sqlTracer(pause.check)}) // another node, held once
	t.Cleanup(pause.free)
	c, _ := conformance.Company(t, s)
	const phone = "+15551230009"
	if _, created, err := s.AddOptOut(c.ID, phone, conformance.T0); err != nil || !created {
		t.Fatalf("AddOptOut: created %v, %v", created, err)
	}
	type added struct {
		created bool
		err     error
	}
	done := make(chan added, 1)
	go func() {
		_, created, err := held.AddOptOut(c.ID, phone, conformance.T0)
		done <- added{created, err}
	}()
	<-pause.reached
	if err := s.RemoveOptOut(c.ID, phone); err != nil {
		t.Fatalf("RemoveOptOut: %v", err)
	}
	pause.free()
	got := <-done
	if got.err != nil || !got.created {
		t.Fatalf("AddOptOut after the removal committed under it: created %v, %v; want created", got.created, got.err)
	}
	if listed, err := s.OptedOut(c.ID, phone); err != nil || !listed {
		t.Errorf("listed %v (%v) after the add, want listed", listed, err)
	}
}
