package conformance

import (
	"reflect"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/window"
)

// poolUnchangedEdit: an edit that leaves the definition as it was (PATCH
// /pools/{id} with {}, or with the values it has) leaves updated_at, and
// everything else, as it was; a change of any part moves it.
func poolUnchangedEdit(t *testing.T, s PoolsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "pu-a")
	Device(t, s, a.ID, "pu-b")
	p := putPool(t, s, a.ID, store.PoolInput{Name: "Sales", Strategy: store.PoolSticky, Fallback: store.PoolRoundRobin, FailoverAfter: 10 * time.Minute,
		Window:  &window.Window{Days: []string{"mon", "tue"}, From: "09:00", To: "17:00", TimeZone: "Europe/Paris"},
		Members: members("pu-a", "SIM1", "pu-b", "SIM2")})
	later := T0.Add(time.Hour)
	same, err := s.PutPool(a.ID, p.ID, later, func(cur store.Pool) (store.PoolInput, error) { return cur.Input(), nil })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(same, p) {
		t.Fatalf("an edit that changes nothing: got %+v, want %+v as it was", same, p)
	}
	if got, err := s.Pool(a.ID, p.ID); err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("read back after an edit that changes nothing: %+v (%v), want %+v", got, err, p)
	}
	for name, edit := range map[string]func(*store.PoolInput){
		"name":           func(in *store.PoolInput) { in.Name = "sales" },
		"strategy":       func(in *store.PoolInput) { in.Strategy, in.Fallback = store.PoolRoundRobin, "" },
		"failover_after": func(in *store.PoolInput) { in.FailoverAfter = 0 },
		"window":         func(in *store.PoolInput) { w := *in.Window; w.To = "18:00"; in.Window = &w },
		"window days":    func(in *store.PoolInput) { w := *in.Window; w.Days = []string{"mon"}; in.Window = &w },
		"no window":      func(in *store.PoolInput) { in.Window = nil },
		"member order":   func(in *store.PoolInput) { in.Members[0], in.Members[1] = in.Members[1], in.Members[0] },
	} {
		later = later.Add(time.Minute)
		got, err := s.PutPool(a.ID, p.ID, later, func(cur store.Pool) (store.PoolInput, error) {
			// Each change starts from the first definition.
			in := p.Input()
			in.Members = append([]store.PoolMemberInput(nil), in.Members...)
			edit(&in)
			return in, nil
		})
		if err != nil || !got.UpdatedAt.Equal(later) {
			t.Errorf("a change of the %s: updated_at %v (%v), want %v", name, got.UpdatedAt, err, later)
		}
	}
}
