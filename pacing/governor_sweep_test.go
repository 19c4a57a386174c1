package pacing

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A removed company's numbers leave the governor at once; another
// company's stay.
func TestGovernorForgetCompany(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	caps := Caps{PerMinute: 1}
	for _, k := range []Key{{Company: 1, Number: 1}, {Company: 1, Number: 2}, {Company: 2, Number: 3}} {
		if r, _ := g.Reserve(k, caps, govStart, nil); r == nil {
			t.Fatalf("%v: first send refused", k)
		}
	}
	g.Dispatch(Key{Company: 1, Number: 4}, Gap{Min: time.Hour, Max: time.Hour}, govStart, time.Time{})
	if n := g.Len(); n != 4 {
		t.Fatalf("holds %d numbers, want 4", n)
	}
	if n := g.ForgetCompany(1); n != 3 {
		t.Fatalf("forgot %d numbers of company 1, want 3", n)
	}
	if n := g.Len(); n != 1 {
		t.Fatalf("holds %d numbers after company 1 went, want 1", n)
	}
	if r, _ := g.Reserve(Key{Company: 2, Number: 3}, caps, govStart, nil); r != nil {
		t.Fatal("company 2's number, at its cap: a second send passed, want its windows kept")
	}
}

// A number's state goes once it carries nothing: its windows empty (a day
// and a bucket after its last send) and its gap over by the idle time.
// Until then it stays, and its caps hold: a number at its day cap, idle
// for hours, is still refused after a sweep (the test's governor has no
// history to read again: a state forgotten too soon would let it send).
func TestGovernorSweepKeepsWhatCapsRemember(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	const idle = time.Hour
	day := Key{Company: 1, Number: 1}
	dayCaps := Caps{PerMinute: 10, PerDay: 3}
	for i := range 3 {
		if r, _ := g.Reserve(day, dayCaps, govStart.Add(time.Duration(i)*time.Second), nil); r == nil {
			t.Fatalf("send %d refused", i+1)
		}
	}
	minute := Key{Company: 1, Number: 2}
	minCaps := Caps{PerMinute: 2}
	for range 2 {
		g.Reserve(minute, minCaps, govStart, nil)
	}
	gapped := Key{Company: 1, Number: 3}
	if _, wait := g.Dispatch(gapped, Gap{Min: time.Hour, Max: time.Hour}, govStart, time.Time{}); wait != 0 {
		t.Fatalf("first dispatch waits %v", wait)
	}

	at := govStart.Add(30 * time.Second)
	if n := g.Sweep(at, 0); n != 0 {
		t.Fatalf("30 s after the sends: swept %d, want none", n)
	}
	if r, _ := g.Reserve(minute, minCaps, at, nil); r != nil {
		t.Fatal("the minute cap forgot its sends across a sweep")
	}

	// Hours later: both numbers' sends are still in their day windows,
	// the gapped number within its gap and the idle time after it.
	at = govStart.Add(90 * time.Minute)
	if n := g.Sweep(at, idle); n != 0 {
		t.Fatalf("90 minutes on: swept %d, want none", n)
	}
	if r, retry := g.Reserve(day, dayCaps, at, nil); r != nil {
		t.Fatal("the day cap forgot its sends across a sweep: a fourth send passed")
	} else if retry <= 0 {
		t.Fatalf("retry %v, want a wait", retry)
	}

	at = govStart.Add(2 * time.Hour)
	if n := g.Sweep(at, idle); n != 1 {
		t.Fatalf("two hours on: swept %d, want 1 (the gapped number, its gap and the idle time over)", n)
	}
	// The day's window holds the sends until their 15-minute bucket has
	// left it whole: a day and a quarter of an hour.
	at = govStart.Add(24*time.Hour + 14*time.Minute)
	if n := g.Sweep(at, idle); n != 0 {
		t.Fatalf("within the day window: swept %d, want none", n)
	}
	if r, _ := g.Reserve(day, dayCaps, at, nil); r != nil {
		t.Fatal("the day cap forgot its sends within the day")
	}
	// A day and a bucket after the last send, every window is empty.
	at = govStart.Add(2*time.Second + 24*time.Hour + 15*time.Minute)
	if n := g.Sweep(at, idle); n != 2 {
		t.Fatalf("past the day window: swept %d, want 2", n)
	}
	if n := g.Len(); n != 0 {
		t.Fatalf("holds %d numbers, want none", n)
	}
	if r, _ := g.Reserve(day, dayCaps, at, nil); r == nil {
		t.Fatal("a day after: a send refused")
	}
}

// A Turn of a state swept gives nothing back to the state made after it:
// the number's new gap stands.
func TestGovernorSweptStateTakesNothingBack(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	k := Key{Company: 1, Number: 1}
	gap := Gap{Min: time.Second, Max: time.Second}
	old, wait := g.Dispatch(k, gap, govStart, time.Time{})
	if wait != 0 {
		t.Fatal("first dispatch waits")
	}
	at := govStart.Add(2 * time.Second)
	if n := g.Sweep(at, time.Second); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	if _, wait := g.Dispatch(k, gap, at, time.Time{}); wait != 0 {
		t.Fatal("dispatch after the sweep waits")
	}
	old.GiveBack()
	if _, wait := g.Dispatch(k, gap, at.Add(time.Millisecond), time.Time{}); wait == 0 {
		t.Fatal("a swept state's turn gave the new state's gap back: two dispatches a millisecond apart")
	}
}

// BenchmarkGovernorSweep is one sweep of 100,000 numbers that all stay.
func BenchmarkGovernorSweep(b *testing.B) {
	const n = 100_000
	g := NewGovernor(rand.NewPCG(1, 2))
	for k := range uint64(n) {
		g.Reserve(Key{Number: k}, Caps{PerMinute: 8}, govStart, nil)
	}
	at := govStart.Add(time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		if g.Sweep(at, time.Minute) != 0 {
			b.Fatal("swept")
		}
	}
}

// Companies lists each company of the numbers held once, and no company
// whose numbers were forgotten or swept.
func TestGovernorCompanies(t *testing.T) {
	t.Parallel()
	g := NewGovernor(rand.NewPCG(1, 2))
	if c := g.Companies(); len(c) != 0 {
		t.Fatalf("an empty governor lists %v", c)
	}
	for _, k := range []Key{{Company: 1, Number: 1}, {Company: 1, Number: 2}, {Company: 2, Number: 3}, {Company: 3, Number: 4}} {
		g.Reserve(k, Caps{PerMinute: 8}, govStart, nil)
	}
	g.ForgetCompany(3)
	got := g.Companies()
	slices.Sort(got)
	if !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("companies %v, want [1 2]", got)
	}
	if n := g.Sweep(govStart.Add(48*time.Hour), time.Hour); n != 3 {
		t.Fatalf("swept %d, want 3", n)
	}
	if c := g.Companies(); len(c) != 0 {
		t.Fatalf("companies %v after every number was swept, want none", c)
	}
}

// BenchmarkGovernorCompanies lists the companies of 100,000 numbers, 100
// each: what the server's look for companies removed elsewhere holds the
// governor's lock for, once a minute.
func BenchmarkGovernorCompanies(b *testing.B) {
	const n = 100_000
	g := NewGovernor(rand.NewPCG(1, 2))
	for k := range uint64(n) {
		g.Reserve(Key{Company: k / 100, Number: k}, Caps{PerMinute: 8}, govStart, nil)
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(g.Companies()) != n/100 {
			b.Fatal("companies")
		}
	}
}
