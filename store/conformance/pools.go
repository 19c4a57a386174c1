package conformance

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/window"
)

// PoolsStore is what the pools suite calls: the pools a company defines and
// its SIMs' caps, without sending.
type PoolsStore interface {
	Base
	Pools(companyID uint64) ([]store.Pool, error)
	Pool(companyID, id uint64) (store.Pool, error)
	PutPool(companyID, id uint64, now time.Time, edit func(cur store.Pool) (store.PoolInput, error)) (store.Pool, error)
	DeletePool(companyID, id uint64) (store.Pool, error)
	AllPools() ([]store.Pool, error)
	DeleteDevice(companyID uint64, fingerprint string, now time.Time) (store.Device, error)
	SIMUsages(companyID uint64, fingerprint string, now time.Time) ([]store.SIMUsage, error)
	SetSIMCaps(companyID uint64, fingerprint string, caps map[string]store.SIMCaps, now time.Time) ([]store.SIMUsage, error)
	CompanySIMCaps(companyID uint64) (map[uint64]map[string]store.SIMCaps, error)
	CarrierFailing(companyID uint64, now time.Time) (map[uint64][]string, error)
	PruneSticky(cutoff time.Time) (int, error)
	PruneSIMCounts(now time.Time) (int, error)
}

// Pools runs the suite of sender pools and SIM caps as a company defines
// them (PoolSends sends through them).
func Pools(t *testing.T, open Opener[PoolsStore]) {
	t.Run("CreateAndEdit", func(t *testing.T) { t.Parallel(); poolCreateAndEdit(t, open(t)) })
	t.Run("Names", func(t *testing.T) { t.Parallel(); poolNames(t, open(t)) })
	t.Run("NamesUnicodeCase", func(t *testing.T) { t.Parallel(); poolNamesUnicodeCase(t, open(t)) })
	t.Run("Members", func(t *testing.T) { t.Parallel(); poolMembers(t, open(t)) })
	t.Run("Tenancy", func(t *testing.T) { t.Parallel(); poolTenancy(t, open(t)) })
	t.Run("Limit", func(t *testing.T) { t.Parallel(); poolLimit(t, open(t)) })
	t.Run("DeletedDeviceLeaves", func(t *testing.T) { t.Parallel(); poolDeletedDeviceLeaves(t, open(t)) })
	t.Run("SIMCaps", func(t *testing.T) { t.Parallel(); simCaps(t, open(t)) })
	t.Run("NothingToPrune", func(t *testing.T) { t.Parallel(); poolNothingToPrune(t, open(t)) })
	t.Run("UnchangedEdit", func(t *testing.T) { t.Parallel(); poolUnchangedEdit(t, open(t)) })
}

// members names (device, SIM) pairs: fingerprint, slot, fingerprint, slot...
func members(pairs ...string) []store.PoolMemberInput {
	var out []store.PoolMemberInput
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, store.PoolMemberInput{Device: pairs[i], SIMSlot: pairs[i+1]})
	}
	return out
}

// putPool creates the pool in, failing the test on an error.
func putPool(t testing.TB, s interface {
	PutPool(companyID, id uint64, now time.Time, edit func(cur store.Pool) (store.PoolInput, error)) (store.Pool, error)
}, companyID uint64, in store.PoolInput) store.Pool {
	t.Helper()
	p, err := s.PutPool(companyID, 0, T0, func(store.Pool) (store.PoolInput, error) { return in, nil })
	if err != nil {
		t.Fatalf("create pool %s: %v", in.Name, err)
	}
	return p
}

// memberNames are a pool's members as "id:fingerprint/slot".
func memberNames(p store.Pool) []string {
	var out []string
	for _, m := range p.Members {
		out = append(out, fmt.Sprintf("%d:%s/%s", m.ID, m.Device, m.SIMSlot))
	}
	return out
}

// poolCreateAndEdit: a new pool gets an id, its members ids from 1 and
// their devices' ids; an edit sees the pool as it is, keeps the ids of the
// members that stay and never gives a removed member's id again; the list
// is oldest first.
func poolCreateAndEdit(t *testing.T, s PoolsStore) {
	a, _ := Company(t, s)
	da := Device(t, s, a.ID, "pe-a")
	db := Device(t, s, a.ID, "pe-b")
	p := putPool(t, s, a.ID, store.PoolInput{Name: "Sales", Strategy: store.PoolRoundRobin, FailoverAfter: 10 * time.Minute,
		Members: members("pe-a", "SIM1", "pe-b", "SIM1", "pe-b", "SIM2")})
	if p.ID == 0 || p.CompanyID != a.ID || p.Name != "Sales" || p.Strategy != store.PoolRoundRobin || p.FailoverAfter != 10*time.Minute ||
		!p.CreatedAt.Equal(T0) || !p.UpdatedAt.Equal(T0) {
		t.Fatalf("new pool: %+v", p)
	}
	if got := memberNames(p); !slices.Equal(got, []string{"1:pe-a/SIM1", "2:pe-b/SIM1", "3:pe-b/SIM2"}) {
		t.Fatalf("members: %v", got)
	}
	if p.Members[0].DeviceID != da.ID || p.Members[1].DeviceID != db.ID {
		t.Fatalf("member device ids: %+v, want %d and %d", p.Members, da.ID, db.ID)
	}
	got, err := s.Pool(a.ID, p.ID)
	if err != nil || got.Name != "Sales" || !slices.Equal(memberNames(got), memberNames(p)) || got.MemberSeq != 3 {
		t.Fatalf("read back: %+v (%v)", got, err)
	}
	later := T0.Add(time.Hour)
	var seen store.Pool
	edited, err := s.PutPool(a.ID, p.ID, later, func(cur store.Pool) (store.PoolInput, error) {
		seen = cur
		in := cur.Input()
		in.Strategy, in.Fallback = store.PoolSticky, store.PoolLeastLoaded
		in.Members = append(members("pe-a", "SIM2"), in.Members[2], in.Members[0]) // pe-b/SIM1 leaves
		return in, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen.ID != p.ID || len(seen.Members) != 3 {
		t.Fatalf("edit saw %+v, want the stored pool", seen)
	}
	if got := memberNames(edited); !slices.Equal(got, []string{"4:pe-a/SIM2", "3:pe-b/SIM2", "1:pe-a/SIM1"}) {
		t.Fatalf("members after the edit: %v", got)
	}
	if edited.Strategy != store.PoolSticky || edited.Fallback != store.PoolLeastLoaded || !edited.CreatedAt.Equal(T0) || !edited.UpdatedAt.Equal(later) {
		t.Fatalf("edited: %+v", edited)
	}
	edited, err = s.PutPool(a.ID, p.ID, later, func(cur store.Pool) (store.PoolInput, error) {
		in := cur.Input()
		in.Members = append(in.Members, members("pe-b", "SIM1")...)
		return in, nil
	})
	if err != nil || edited.Members[3].ID != 5 {
		t.Fatalf("a member that comes back: %v (%v), want a new id 5", memberNames(edited), err)
	}
	refuse := errors.New("refused")
	if _, err := s.PutPool(a.ID, p.ID, later, func(store.Pool) (store.PoolInput, error) { return store.PoolInput{}, refuse }); !errors.Is(err, refuse) {
		t.Fatalf("edit's error: %v, want it as it is", err)
	}
	second := putPool(t, s, a.ID, store.PoolInput{Name: "Support", Strategy: store.PoolLeastLoaded, Members: members("pe-a", "SIM1")})
	list, err := s.Pools(a.ID)
	if err != nil || len(list) != 2 || list[0].ID != p.ID || list[1].ID != second.ID || len(list[0].Members) != 4 {
		t.Fatalf("pools: %+v (%v), want Sales then Support", list, err)
	}
	if del, err := s.DeletePool(a.ID, p.ID); err != nil || del.ID != p.ID || del.Name != "Sales" {
		t.Fatalf("delete: %+v (%v)", del, err)
	}
	if _, err := s.Pool(a.ID, p.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted pool: %v, want ErrNotFound", err)
	}
	if _, err := s.DeletePool(a.ID, p.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted twice: %v, want ErrNotFound", err)
	}
	if _, err := s.PutPool(a.ID, p.ID, later, func(cur store.Pool) (store.PoolInput, error) { return cur.Input(), nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an edit of a deleted pool: %v, want ErrNotFound", err)
	}
	if list, err := s.Pools(a.ID); err != nil || len(list) != 1 || list[0].ID != second.ID {
		t.Fatalf("pools after the delete: %+v (%v)", list, err)
	}
}

// poolNames: a name is the company's once, whatever its case; a pool may
// change the case of its own name; another company, or a name freed by a
// delete, may take it.
func poolNames(t *testing.T, s PoolsStore) {
	a, b := twoCompanies(t, s, "pn")
	p := putPool(t, s, a.ID, store.PoolInput{Name: "Sales", Strategy: store.PoolRoundRobin, Members: members("pn-a", "SIM1")})
	if _, err := s.PutPool(a.ID, 0, T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "SALES", Strategy: store.PoolRoundRobin}, nil
	}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a taken name in another case: %v, want ErrConflict", err)
	}
	other := putPool(t, s, a.ID, store.PoolInput{Name: "Other", Strategy: store.PoolRoundRobin})
	if _, err := s.PutPool(a.ID, other.ID, T0, func(cur store.Pool) (store.PoolInput, error) {
		in := cur.Input()
		in.Name = "sales"
		return in, nil
	}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a rename to a taken name: %v, want ErrConflict", err)
	}
	if got, err := s.PutPool(a.ID, p.ID, T0, func(cur store.Pool) (store.PoolInput, error) {
		in := cur.Input()
		in.Name = "SALES"
		return in, nil
	}); err != nil || got.Name != "SALES" {
		t.Fatalf("a pool renamed to its own name in capitals: %+v (%v)", got, err)
	}
	putPool(t, s, b.ID, store.PoolInput{Name: "sales", Strategy: store.PoolRoundRobin, Members: members("pn-b", "SIM1")})
	if _, err := s.DeletePool(a.ID, p.ID); err != nil {
		t.Fatal(err)
	}
	putPool(t, s, a.ID, store.PoolInput{Name: "Sales", Strategy: store.PoolRoundRobin})
}

// poolNamesUnicodeCase: names are folded as Go's strings.ToLower folds
// them on both backends (accountsEmailCase): "İstanbul" and "ISTANBUL" are
// one name, as are "\u212Aiosk" (the Kelvin sign) and "kiosk"; "ſales"
// (the long s) and "sales" are two, as are "Kıyı" (the dotless ı) and
// "Kiyi".
func poolNamesUnicodeCase(t *testing.T, s PoolsStore) {
	a, _ := twoCompanies(t, s, "pu")
	for _, name := range []string{"İstanbul", "\u212Aiosk", "sales", "Kıyı"} {
		putPool(t, s, a.ID, store.PoolInput{Name: name, Strategy: store.PoolRoundRobin})
	}
	for _, tc := range []struct {
		name  string
		taken bool
	}{
		{"ISTANBUL", true},
		{"istanbul", true},
		{"i\u0307stanbul", false},
		{"kiosk", true},
		{"KIOSK", true},
		{"ſales", false},
		{"SALES", true},
		{"Kiyi", false},
		{"KIYI", true}, // the "Kiyi" just made
		{"KıYı", true}, // "Kıyı"
	} {
		_, err := s.PutPool(a.ID, 0, T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: tc.name, Strategy: store.PoolRoundRobin}, nil
		})
		if tc.taken && !errors.Is(err, store.ErrConflict) {
			t.Errorf("a pool named %q: %v, want ErrConflict", tc.name, err)
		}
		if !tc.taken && err != nil {
			t.Errorf("a pool named %q: %v, want it created", tc.name, err)
		}
	}
}

// poolMembers: a member must name a live device of the company, once per
// SIM; a refused definition changes nothing.
func poolMembers(t *testing.T, s PoolsStore) {
	a, _ := twoCompanies(t, s, "pm")
	p := putPool(t, s, a.ID, store.PoolInput{Name: "p", Strategy: store.PoolRoundRobin, Members: members("pm-a", "SIM1")})
	for name, c := range map[string]struct {
		members []store.PoolMemberInput
		index   int
		err     error
	}{
		"an unknown device":         {members("pm-a", "SIM1", "pm-none", "SIM1"), 1, store.ErrDeviceGone},
		"another company's device":  {members("pm-b", "SIM1"), 0, store.ErrDeviceGone},
		"a (device, SIM) twice":     {members("pm-a", "SIM2", "pm-a", "SIM1", "pm-a", "SIM2"), 2, store.ErrConflict},
		"an unknown device, new":    {members("pm-none", "SIM2"), 0, store.ErrDeviceGone},
		"another company's, in new": {members("pm-a", "SIM1", "pm-b", "SIM2"), 1, store.ErrDeviceGone},
	} {
		for _, id := range []uint64{p.ID, 0} {
			_, err := s.PutPool(a.ID, id, T0.Add(time.Hour), func(store.Pool) (store.PoolInput, error) {
				return store.PoolInput{Name: fmt.Sprintf("p%d", id), Strategy: store.PoolRoundRobin, Members: c.members}, nil
			})
			var me *store.PoolMemberError
			if !errors.As(err, &me) || me.Index != c.index || !errors.Is(err, c.err) {
				t.Fatalf("%s (pool %d): %v, want a member error at %d (%v)", name, id, err, c.index, c.err)
			}
		}
	}
	got, err := s.Pool(a.ID, p.ID)
	if err != nil || got.Name != "p" || !slices.Equal(memberNames(got), []string{"1:pm-a/SIM1"}) || !got.UpdatedAt.Equal(T0) {
		t.Fatalf("after refused edits: %+v (%v), want it unchanged", got, err)
	}
	if list, _ := s.Pools(a.ID); len(list) != 1 {
		t.Fatalf("refused pools were stored: %+v", list)
	}
}

// poolTenancy: a company reads, edits and deletes only its own pools;
// AllPools lists every company's.
func poolTenancy(t *testing.T, s PoolsStore) {
	a, b := twoCompanies(t, s, "pt")
	pa := putPool(t, s, a.ID, store.PoolInput{Name: "a", Strategy: store.PoolRoundRobin, Members: members("pt-a", "SIM1")})
	pb := putPool(t, s, b.ID, store.PoolInput{Name: "b", Strategy: store.PoolRoundRobin, Members: members("pt-b", "SIM1")})
	if _, err := s.Pool(b.ID, pa.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another company's pool: %v, want ErrNotFound", err)
	}
	called := false
	if _, err := s.PutPool(b.ID, pa.ID, T0, func(store.Pool) (store.PoolInput, error) { called = true; return store.PoolInput{Name: "x"}, nil }); !errors.Is(err, store.ErrNotFound) || called {
		t.Fatalf("an edit of another company's pool: %v (edit called %v), want ErrNotFound", err, called)
	}
	if _, err := s.DeletePool(b.ID, pa.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a delete of another company's pool: %v, want ErrNotFound", err)
	}
	if list, err := s.Pools(b.ID); err != nil || len(list) != 1 || list[0].ID != pb.ID {
		t.Fatalf("b's pools: %+v (%v)", list, err)
	}
	c, _ := Company(t, s)
	if list, err := s.Pools(c.ID); err != nil || len(list) != 0 {
		t.Fatalf("a company without pools: %+v (%v)", list, err)
	}
	all, err := s.AllPools()
	if err != nil {
		t.Fatal(err)
	}
	found := map[uint64]uint64{}
	for _, p := range all {
		found[p.ID] = p.CompanyID
	}
	if len(all) != 2 || found[pa.ID] != a.ID || found[pb.ID] != b.ID {
		t.Fatalf("all pools: %+v, want a's and b's", all)
	}
}

// poolLimit: a company has at most store.MaxPools; a delete makes room.
func poolLimit(t *testing.T, s PoolsStore) {
	a, _ := Company(t, s)
	var last store.Pool
	for i := range store.MaxPools {
		last = putPool(t, s, a.ID, store.PoolInput{Name: fmt.Sprintf("p%d", i), Strategy: store.PoolRoundRobin})
	}
	create := func() error {
		_, err := s.PutPool(a.ID, 0, T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: "one more", Strategy: store.PoolRoundRobin}, nil
		})
		return err
	}
	if err := create(); !errors.Is(err, store.ErrTooManyPools) {
		t.Fatalf("pool %d: %v, want ErrTooManyPools", store.MaxPools+1, err)
	}
	b, _ := Company(t, s)
	putPool(t, s, b.ID, store.PoolInput{Name: "b's", Strategy: store.PoolRoundRobin})
	if _, err := s.DeletePool(a.ID, last.ID); err != nil {
		t.Fatal(err)
	}
	if err := create(); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
}

// poolDeletedDeviceLeaves: a deleted device leaves every pool it was in,
// in the deletion's transaction; a phone registered again under its
// fingerprint is a new device and joins none.
func poolDeletedDeviceLeaves(t *testing.T, s PoolsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "pd-a")
	Device(t, s, a.ID, "pd-b")
	p := putPool(t, s, a.ID, store.PoolInput{Name: "p", Strategy: store.PoolRoundRobin, Members: members("pd-a", "SIM1", "pd-b", "SIM1", "pd-a", "SIM2")})
	q := putPool(t, s, a.ID, store.PoolInput{Name: "q", Strategy: store.PoolRoundRobin, Members: members("pd-b", "SIM2")})
	at := T0.Add(time.Minute)
	if _, err := s.DeleteDevice(a.ID, "pd-a", at); err != nil {
		t.Fatal(err)
	}
	got, err := s.Pool(a.ID, p.ID)
	if err != nil || !slices.Equal(memberNames(got), []string{"2:pd-b/SIM1"}) || !got.UpdatedAt.Equal(at) {
		t.Fatalf("pool after pd-a's deletion: %+v (%v), want pd-b alone", got, err)
	}
	if got, err := s.Pool(a.ID, q.ID); err != nil || len(got.Members) != 1 || !got.UpdatedAt.Equal(T0) {
		t.Fatalf("a pool without pd-a: %+v (%v), want it untouched", got, err)
	}
	Device(t, s, a.ID, "pd-a")
	if got, _ := s.Pool(a.ID, p.ID); len(got.Members) != 1 {
		t.Fatalf("pd-a registered again joined its old pool: %v", memberNames(got))
	}
}

// simCaps: caps are set per slot (the others keep theirs, zero caps clear
// a slot's), read back with both slots' use, and read for the whole
// company (CompanySIMCaps: only the SIMs with a cap, of its live devices);
// they belong to the company's registration of the device: another
// company's, or an unknown one, is ErrDeviceGone (the API's 404).
func simCaps(t *testing.T, s PoolsStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	dev := Device(t, s, a.ID, "sc-a")
	wantCompanyCaps := func(companyID uint64, want map[uint64]map[string]store.SIMCaps) {
		t.Helper()
		got, err := s.CompanySIMCaps(companyID)
		if err != nil || len(got) != len(want) {
			t.Fatalf("company %d's SIM caps: %v (%v), want %v", companyID, got, err, want)
		}
		for d, slots := range want {
			if !maps.Equal(got[d], slots) {
				t.Fatalf("company %d's SIM caps: %v, want %v", companyID, got, want)
			}
		}
	}
	wantCompanyCaps(a.ID, nil)
	us, err := s.SetSIMCaps(a.ID, "sc-a", map[string]store.SIMCaps{"SIM1": {PerDay: 10, PerMonth: 100}}, T0)
	if err != nil || len(us) != 2 || us[0].Slot != "SIM1" || us[1].Slot != "SIM2" ||
		us[0].Caps != (store.SIMCaps{PerDay: 10, PerMonth: 100}) || us[1].Caps != (store.SIMCaps{}) || us[0].Day != 0 || us[0].Month != 0 {
		t.Fatalf("set SIM1's caps: %+v (%v)", us, err)
	}
	us, err = s.SetSIMCaps(a.ID, "sc-a", map[string]store.SIMCaps{"SIM2": {RecipientsPerDay: 5}}, T0)
	if err != nil || us[0].Caps.PerDay != 10 || us[1].Caps != (store.SIMCaps{RecipientsPerDay: 5}) {
		t.Fatalf("set SIM2's caps: %+v (%v), want SIM1's kept", us, err)
	}
	if got, err := s.SIMUsages(a.ID, "sc-a", T0); err != nil || !slices.Equal(got, us) {
		t.Fatalf("usages: %+v (%v), want %+v", got, err, us)
	}
	other := Device(t, s, a.ID, "sc-other")
	Device(t, s, a.ID, "sc-bare") // no caps
	if _, err := s.SetSIMCaps(a.ID, "sc-other", map[string]store.SIMCaps{"SIM2": {PerMonth: 7}}, T0); err != nil {
		t.Fatal(err)
	}
	bdev := Device(t, s, b.ID, "sc-b")
	if _, err := s.SetSIMCaps(b.ID, "sc-b", map[string]store.SIMCaps{"SIM1": {PerDay: 3}}, T0); err != nil {
		t.Fatal(err)
	}
	wantCompanyCaps(a.ID, map[uint64]map[string]store.SIMCaps{
		dev.ID:   {"SIM1": {PerDay: 10, PerMonth: 100}, "SIM2": {RecipientsPerDay: 5}},
		other.ID: {"SIM2": {PerMonth: 7}},
	})
	us, err = s.SetSIMCaps(a.ID, "sc-a", map[string]store.SIMCaps{"SIM1": {}}, T0)
	if err != nil || us[0].Caps != (store.SIMCaps{}) || us[1].Caps.RecipientsPerDay != 5 {
		t.Fatalf("clear SIM1's caps: %+v (%v)", us, err)
	}
	if _, err := s.DeleteDevice(a.ID, "sc-other", T0); err != nil {
		t.Fatal(err)
	}
	wantCompanyCaps(a.ID, map[uint64]map[string]store.SIMCaps{dev.ID: {"SIM2": {RecipientsPerDay: 5}}})
	for _, c := range []struct {
		company uint64
		fp      string
	}{{b.ID, "sc-a"}, {a.ID, "sc-none"}} {
		if _, err := s.SetSIMCaps(c.company, c.fp, map[string]store.SIMCaps{"SIM1": {PerDay: 1}}, T0); !errors.Is(err, store.ErrDeviceGone) {
			t.Fatalf("set caps of %s as company %d: %v, want ErrDeviceGone", c.fp, c.company, err)
		}
		if _, err := s.SIMUsages(c.company, c.fp, T0); !errors.Is(err, store.ErrDeviceGone) {
			t.Fatalf("caps of %s as company %d: %v, want ErrDeviceGone", c.fp, c.company, err)
		}
	}
	if _, err := s.DeleteDevice(a.ID, "sc-a", T0); err != nil {
		t.Fatal(err)
	}
	Device(t, s, a.ID, "sc-a")
	if us, err := s.SIMUsages(a.ID, "sc-a", T0); err != nil || us[1].Caps != (store.SIMCaps{}) {
		t.Fatalf("a new registration's caps: %+v (%v), want none", us, err)
	}
	wantCompanyCaps(a.ID, nil)
	wantCompanyCaps(b.ID, map[uint64]map[string]store.SIMCaps{bdev.ID: {"SIM1": {PerDay: 3}}})
}

// poolNothingToPrune: the prunes of a store that sent nothing find
// nothing, and a company without failures has no failing SIM.
func poolNothingToPrune(t *testing.T, s PoolsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "np")
	if _, err := s.SetSIMCaps(a.ID, "np", map[string]store.SIMCaps{"SIM1": {PerDay: 1}}, T0); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneSticky(T0); err != nil || n != 0 {
		t.Fatalf("prune sticky: %d (%v)", n, err)
	}
	if n, err := s.PruneSIMCounts(T0.Add(48 * time.Hour)); err != nil || n != 0 {
		t.Fatalf("prune SIM counts: %d (%v)", n, err)
	}
	if us, _ := s.SIMUsages(a.ID, "np", T0); us[0].Caps.PerDay != 1 {
		t.Fatalf("pruning dropped the caps: %+v", us)
	}
	if f, err := s.CarrierFailing(a.ID, T0); err != nil || len(f) != 0 {
		t.Fatalf("carrier failing: %v (%v), want none", f, err)
	}
}

// PoolSendsStore is what the suite of sends through pools and under SIM
// caps calls.
type PoolSendsStore interface {
	Base
	PutPool(companyID, id uint64, now time.Time, edit func(cur store.Pool) (store.PoolInput, error)) (store.Pool, error)
	UpdateDevice(companyID uint64, fingerprint string, fn func(*store.Device) error) (store.Device, error)
	Enqueue(m *store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func(store.Message) (int, []byte)) (store.Message, *store.Idempotent, error)
	EnqueueBulk(ms []store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func([]store.Message) (int, []byte)) ([]store.Message, *store.Idempotent, error)
	Transition(companyID, deviceID uint64, uuid, status, errText, statusAt string, now time.Time) (store.Message, bool, error)
	MessageByUUID(companyID uint64, uuid string) (store.Message, error)
	SIMUsages(companyID uint64, fingerprint string, now time.Time) ([]store.SIMUsage, error)
	SetSIMCaps(companyID uint64, fingerprint string, caps map[string]store.SIMCaps, now time.Time) ([]store.SIMUsage, error)
	PruneSIMCounts(now time.Time) (int, error)
	PruneSticky(cutoff time.Time) (int, error)
	CarrierFailing(companyID uint64, now time.Time) (map[uint64][]string, error)
	Failover(in store.FailoverInput, check store.DeviceCheck, now time.Time) (moved []store.Message, next uint64, err error)
	DeleteDevice(companyID uint64, fingerprint string, now time.Time) (store.Device, error)
}

// PoolSends runs the suite of sends through pools (each strategy, members
// passed over, failover) and under SIM caps (exact under concurrency).
func PoolSends(t *testing.T, open Opener[PoolSendsStore]) {
	t.Run("RoundRobin", func(t *testing.T) { t.Parallel(); poolRoundRobin(t, open(t)) })
	t.Run("LeastLoaded", func(t *testing.T) { t.Parallel(); poolLeastLoaded(t, open(t)) })
	t.Run("LeastLoadedCountsPriority", func(t *testing.T) { t.Parallel(); poolLeastLoadedCountsPriority(t, open(t)) })
	t.Run("Sticky", func(t *testing.T) { t.Parallel(); poolSticky(t, open(t)) })
	t.Run("StickyAgeAndPrune", func(t *testing.T) { t.Parallel(); poolStickyAgeAndPrune(t, open(t)) })
	t.Run("StickyReadsSMSOnly", func(t *testing.T) { t.Parallel(); poolStickyReadsSMSOnly(t, open(t)) })
	t.Run("StickyBulk", func(t *testing.T) { t.Parallel(); poolStickyBulk(t, open(t)) })
	t.Run("CapsExact", func(t *testing.T) { t.Parallel(); simCapsExact(t, open(t)) })
	t.Run("RecipientsCap", func(t *testing.T) { t.Parallel(); simRecipientsCap(t, open(t)) })
	t.Run("RecipientsCapBulk", func(t *testing.T) { t.Parallel(); simRecipientsCapBulk(t, open(t)) })
	t.Run("DayAndMonthCapsFull", func(t *testing.T) { t.Parallel(); simDayAndMonthCapsFull(t, open(t)) })
	t.Run("PoolCapped", func(t *testing.T) { t.Parallel(); poolCapped(t, open(t)) })
	t.Run("CountsPruned", func(t *testing.T) { t.Parallel(); simCountsPruned(t, open(t)) })
	t.Run("CarrierErrors", func(t *testing.T) { t.Parallel(); carrierErrors(t, open(t)) })
	t.Run("DeletedDeviceSIMs", func(t *testing.T) { t.Parallel(); deletedDeviceSIMs(t, open(t)) })
	t.Run("Failover", func(t *testing.T) { t.Parallel(); poolFailover(t, open(t)) })
	t.Run("FailoverBatches", func(t *testing.T) { t.Parallel(); poolFailoverBatches(t, open(t)) })
	t.Run("FailoverTwoPools", func(t *testing.T) { t.Parallel(); poolFailoverTwoPools(t, open(t)) })
	t.Run("FailoverAttemptsBounded", func(t *testing.T) { t.Parallel(); poolFailoverAttemptsBounded(t, open(t)) })
	t.Run("Window", func(t *testing.T) { t.Parallel(); poolWindow(t, open(t)) })
	t.Run("PoolOfAnotherCompany", func(t *testing.T) { t.Parallel(); poolOfAnotherCompany(t, open(t)) })
	t.Run("IdempotencyRace", func(t *testing.T) { t.Parallel(); poolIdempotencyRace(t, open(t)) })
}

// poolSender sends one SMS at a time through a store, each with a new uuid.
type poolSender struct {
	t       testing.TB
	s       PoolSendsStore
	company uint64
}

func (x poolSender) msg(to string) store.Message {
	return store.Message{UUID: fmt.Sprintf("ps-%d", unique()), CompanyID: x.company, Channel: "sms", Phone: to, Text: "hi"}
}

// pool sends to phone through the pool at at; the error is the store's.
func (x poolSender) pool(name, to string, at time.Time) (store.Message, error) {
	m := x.msg(to)
	m.Pool = name
	out, _, err := x.s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return at }, nil, nil)
	return out, err
}

// via sends through the pool and returns "fingerprint/slot" of the member.
func (x poolSender) via(name, to string, at time.Time) string {
	x.t.Helper()
	out, err := x.pool(name, to, at)
	if err != nil {
		x.t.Fatalf("send to %s through %s: %v", to, name, err)
	}
	if out.PoolID == 0 || out.DeviceID == 0 || out.Status != store.MsgQueued {
		x.t.Fatalf("sent through %s: %+v, want queued with its pool and member", name, out)
	}
	return out.Device + "/" + out.SIMSlot
}

// direct sends to phone from the device's slot at at.
func (x poolSender) direct(fp, slot, to string, at time.Time) (store.Message, error) {
	m := x.msg(to)
	m.Device, m.SIMSlot = fp, slot
	out, _, err := x.s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return at }, nil, nil)
	return out, err
}

// poolRoundRobin: members take sends in turn, the pool's id and the
// member's device and SIM set on each; a disabled device's members are
// passed over; with none left the send is a *PoolUnavailableError; an
// unknown pool is ErrPoolGone; an edit of the members starts the turns
// afresh.
func poolRoundRobin(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "rr-a")
	Device(t, s, a.ID, "rr-b")
	p := putPool(t, s, a.ID, store.PoolInput{Name: "rr", Strategy: store.PoolRoundRobin, Members: members("rr-a", "SIM1", "rr-b", "SIM1", "rr-b", "SIM2")})
	x := poolSender{t, s, a.ID}
	var got []string
	for i := range 6 {
		got = append(got, x.via("rr", fmt.Sprintf("+1555000%04d", i), T0))
	}
	want := []string{"rr-a/SIM1", "rr-b/SIM1", "rr-b/SIM2", "rr-a/SIM1", "rr-b/SIM1", "rr-b/SIM2"}
	if !slices.Equal(got, want) {
		t.Fatalf("round robin: %v, want %v", got, want)
	}
	if out, err := x.pool("rr", "+15550001000", T0); err != nil || out.PoolID != p.ID {
		t.Fatalf("pool id on the message: %+v (%v), want %d", out, err, p.ID)
	}
	if _, err := s.UpdateDevice(a.ID, "rr-b", func(d *store.Device) error { d.Status = store.DeviceDisabled; return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if got := x.via("rr", fmt.Sprintf("+1555001%04d", i), T0); got != "rr-a/SIM1" {
			t.Fatalf("with rr-b disabled: %s, want rr-a/SIM1", got)
		}
	}
	if _, err := s.UpdateDevice(a.ID, "rr-a", func(d *store.Device) error { d.Status = store.DeviceDisabled; return nil }); err != nil {
		t.Fatal(err)
	}
	var pu *store.PoolUnavailableError
	if _, err := x.pool("rr", "+15550002000", T0); !errors.As(err, &pu) || pu.Pool != "rr" || len(pu.Reasons) != 3 {
		t.Fatalf("every member disabled: %v, want a *PoolUnavailableError with three reasons", err)
	}
	if _, err := x.pool("none", "+15550002000", T0); !errors.Is(err, store.ErrPoolGone) {
		t.Fatalf("an unknown pool: %v, want ErrPoolGone", err)
	}
	putPool(t, s, a.ID, store.PoolInput{Name: "empty", Strategy: store.PoolRoundRobin})
	if _, err := x.pool("empty", "+15550002000", T0); !errors.As(err, &pu) {
		t.Fatalf("a pool without members: %v, want a *PoolUnavailableError", err)
	}
	// Enabled again, and the members reordered: the turns start afresh.
	for _, fp := range []string{"rr-a", "rr-b"} {
		if _, err := s.UpdateDevice(a.ID, fp, func(d *store.Device) error { d.Status = store.DeviceActive; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutPool(a.ID, p.ID, T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "rr", Strategy: store.PoolRoundRobin, Members: members("rr-b", "SIM2", "rr-a", "SIM1")}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := x.via("rr", "+15550003000", T0); got != "rr-b/SIM2" {
		t.Fatalf("after an edit: %s, want the first member, rr-b/SIM2", got)
	}
}

// poolLeastLoaded: the member whose device has the fewest queued jobs
// takes the send; equal members share in turn.
func poolLeastLoaded(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "ll-a")
	Device(t, s, a.ID, "ll-b")
	x := poolSender{t, s, a.ID}
	for i := range 2 {
		if _, err := x.direct("ll-a", "SIM1", fmt.Sprintf("+1555100%04d", i), T0); err != nil {
			t.Fatal(err)
		}
	}
	putPool(t, s, a.ID, store.PoolInput{Name: "ll", Strategy: store.PoolLeastLoaded, Members: members("ll-a", "SIM1", "ll-b", "SIM1")})
	for i := range 2 {
		if got := x.via("ll", fmt.Sprintf("+1555101%04d", i), T0); got != "ll-b/SIM1" {
			t.Fatalf("send %d: %s, want ll-b, the device with the shorter queue", i, got)
		}
	}
	n := map[string]int{}
	for i := range 4 {
		n[x.via("ll", fmt.Sprintf("+1555102%04d", i), T0)]++
	}
	if n["ll-a/SIM1"] != 2 || n["ll-b/SIM1"] != 2 {
		t.Fatalf("equal queues: %v, want two each", n)
	}
}

// poolLeastLoadedCountsPriority: a device's queue is its priority jobs as
// well as its plain ones: a device with two priority jobs waiting is more
// loaded than an idle one. The embedded store counted the plain queue
// alone, where PostgreSQL counted both, so the two stores chose different
// members for the same sends.
func poolLeastLoadedCountsPriority(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "lp-a")
	Device(t, s, a.ID, "lp-b")
	x := poolSender{t, s, a.ID}
	for i := range 2 {
		m := x.msg(fmt.Sprintf("+1555103%04d", i))
		m.Device, m.SIMSlot, m.Priority = "lp-a", "SIM1", 5
		if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return T0 }, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	putPool(t, s, a.ID, store.PoolInput{Name: "lp", Strategy: store.PoolLeastLoaded, Members: members("lp-a", "SIM1", "lp-b", "SIM1")})
	for i := range 2 {
		if got := x.via("lp", fmt.Sprintf("+1555104%04d", i), T0); got != "lp-b/SIM1" {
			t.Fatalf("send %d: %s, want lp-b, the device without the two priority jobs", i, got)
		}
	}
}

// poolSticky: a recipient stays on the member it was first sent from; a
// new one takes the fallback's turn.
func poolSticky(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	for i := range 3 {
		Device(t, s, a.ID, fmt.Sprintf("st-%d", i))
	}
	putPool(t, s, a.ID, store.PoolInput{Name: "keep", Strategy: store.PoolSticky, Fallback: store.PoolRoundRobin,
		Members: members("st-0", "SIM1", "st-1", "SIM1", "st-2", "SIM2")})
	x := poolSender{t, s, a.ID}
	first := map[string]string{}
	for i := range 3 {
		to := fmt.Sprintf("+1555200000%d", i)
		first[to] = x.via("keep", to, T0)
	}
	if len(map[string]bool{first["+15552000000"]: true, first["+15552000001"]: true, first["+15552000002"]: true}) != 3 {
		t.Fatalf("three new recipients: %v, want one per member", first)
	}
	for to, was := range first {
		if got := x.via("keep", to, T0.Add(time.Hour)); got != was {
			t.Fatalf("%s went from %s, want %s, where it went first", to, got, was)
		}
	}
	if got := x.via("keep", "+15552000009", T0); got != "st-0/SIM1" {
		t.Fatalf("the next new recipient went from %s, want the fallback's turn, st-0/SIM1", got)
	}
}

// poolStickyReadsSMSOnly: a recipient never sent to through the pool goes
// to the member of the newest SMS conversation with it; a WhatsApp message
// of a member's device (an Android phone that is also an agent) with the
// same number is no SMS conversation and does not count. PostgreSQL read
// the recipient's newest message of any channel, and sent the SMS from the
// agent's device, where the embedded store sent it from the device the
// recipient had texted with.
func poolStickyReadsSMSOnly(t *testing.T, s PoolSendsStore) {
	agents, ok := s.(interface {
		AnnounceNumbers(companyID, deviceID uint64, channel string, addresses []string, now time.Time, limit int) ([]store.AgentNumber, error)
		StoreAgentInbound(m *store.Message, now func() time.Time) (store.Message, bool, error)
	})
	if !ok {
		t.Fatal("the store keeps no agent messages")
	}
	a, _ := Company(t, s)
	Device(t, s, a.ID, "so-sms")
	agent := Device(t, s, a.ID, "so-agent")
	putPool(t, s, a.ID, store.PoolInput{Name: "so", Strategy: store.PoolSticky, Fallback: store.PoolRoundRobin,
		Members: members("so-agent", "SIM1", "so-sms", "SIM1")})
	x := poolSender{t, s, a.ID}
	const to = "+15552100000"
	if _, err := x.direct("so-sms", "SIM1", to, T0); err != nil {
		t.Fatal(err)
	}
	if _, err := agents.AnnounceNumbers(a.ID, agent.ID, store.ChannelNameWhatsApp, []string{waX}, T0, 0); err != nil {
		t.Fatal(err)
	}
	in := store.Message{UUID: fmt.Sprintf("so-in-%d", unique()), CompanyID: a.ID, DeviceID: agent.ID, Channel: store.ChannelNameWhatsApp,
		Phone: to, Account: waX, Text: "hi on WhatsApp", ContentType: "text", Segments: 1, ClientID: "so-1"}
	if _, _, err := agents.StoreAgentInbound(&in, func() time.Time { return T0.Add(time.Minute) }); err != nil {
		t.Fatal(err)
	}
	if got := x.via("so", to, T0.Add(2*time.Minute)); got != "so-sms/SIM1" {
		t.Fatalf("the recipient's SMS went from %s, want so-sms/SIM1, the device of its SMS conversation", got)
	}
}

// poolStickyBulk: a bulk send through a sticky pool picks each recipient's
// member as single sends do: a recipient whose entry is StickyAge old
// exactly keeps its member even though another member texted it since; one
// whose entry is older goes to the member of its newest conversation; a
// new recipient takes the fallback's turn, and again the same member when
// it comes twice in the request.
func poolStickyBulk(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	for i := range 4 {
		Device(t, s, a.ID, fmt.Sprintf("sb-%d", i))
	}
	putPool(t, s, a.ID, store.PoolInput{Name: "sb", Strategy: store.PoolSticky, Fallback: store.PoolRoundRobin,
		Members: members("sb-0", "SIM1", "sb-1", "SIM1", "sb-2", "SIM1", "sb-3", "SIM1")})
	x := poolSender{t, s, a.ID}
	const fresh, stale, fresh2, fresh3 = "+15553100001", "+15553100002", "+15553100003", "+15553100004"
	late := T0.Add(store.StickyAge + time.Hour)
	if got := x.via("sb", fresh, T0); got != "sb-0/SIM1" {
		t.Fatalf("the first recipient went from %s, want sb-0/SIM1", got)
	}
	if got := x.via("sb", stale, T0); got != "sb-1/SIM1" {
		t.Fatalf("the second recipient went from %s, want sb-1/SIM1", got)
	}
	if _, err := x.direct("sb-3", "SIM1", stale, T0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := x.via("sb", fresh, late.Add(-time.Hour)); got != "sb-0/SIM1" {
		t.Fatalf("the first recipient, its entry StickyAge old, went from %s, want sb-0/SIM1", got)
	}
	if _, err := x.direct("sb-2", "SIM1", fresh, late.Add(-30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	var bulk []store.Message
	for _, to := range []string{fresh, stale, fresh2, fresh2, fresh3} {
		m := x.msg(to)
		m.Pool = "sb"
		bulk = append(bulk, m)
	}
	out, _, err := s.EnqueueBulk(bulk, store.IdempotencyKey{}, func() time.Time { return late }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range out {
		got = append(got, m.Device+"/"+m.SIMSlot)
	}
	if want := []string{"sb-0/SIM1", "sb-3/SIM1", "sb-2/SIM1", "sb-2/SIM1", "sb-3/SIM1"}; !slices.Equal(got, want) {
		t.Fatalf("the bulk went from %v, want %v: the fresh entry's member, the stale one's newest conversation, "+
			"then the fallback's turn for the new recipients (the same member for the one that comes twice)", got, want)
	}
	if got := x.via("sb", stale, late); got != "sb-3/SIM1" {
		t.Fatalf("after the bulk the second recipient went from %s, want sb-3/SIM1, its entry the bulk wrote", got)
	}
}

// poolStickyAgeAndPrune: sticky entries older than StickyAge are pruned,
// fresh ones kept, and a recipient whose entry went still goes to the
// member it last talked to (its newest conversation).
func poolStickyAgeAndPrune(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "sa-a")
	Device(t, s, a.ID, "sa-b")
	putPool(t, s, a.ID, store.PoolInput{Name: "p", Strategy: store.PoolSticky, Fallback: store.PoolRoundRobin, Members: members("sa-a", "SIM1", "sa-b", "SIM1")})
	x := poolSender{t, s, a.ID}
	old := x.via("p", "+15553000001", T0)
	later := T0.Add(store.StickyAge + 24*time.Hour)
	x.via("p", "+15553000002", later)
	if n, err := s.PruneSticky(later.Add(-store.StickyAge)); err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want the old entry only", n, err)
	}
	if n, err := s.PruneSticky(later.Add(-store.StickyAge)); err != nil || n != 0 {
		t.Fatalf("pruned again %d (%v), want none", n, err)
	}
	// A third recipient takes round robin's turn, so its next pick is the
	// other member; the conversation keeps the first recipient where it was.
	if third := x.via("p", "+15553000003", later); third != old {
		t.Fatalf("the third recipient went to %s, want round robin's %s", third, old)
	}
	if again := x.via("p", "+15553000001", later); again != old {
		t.Fatalf("the recipient whose entry was pruned went to %s, want %s, the member it last talked to", again, old)
	}
}

// simCapsExact: a SIM's daily cap refuses at the exact count however many
// sends race (a *SIMCappedError until midnight UTC); the month's cap
// carries over days; a bulk send that does not fit is refused whole.
func simCapsExact(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "cap")
	if _, err := s.SetSIMCaps(a.ID, "cap", map[string]store.SIMCaps{"SIM1": {PerDay: 10, PerMonth: 12}}, T0); err != nil {
		t.Fatal(err)
	}
	x := poolSender{t, s, a.ID}
	race := func(n int, at time.Time) (ok int, capped []*store.SIMCappedError) {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = x.direct("cap", "SIM1", fmt.Sprintf("+1555400%04d", i), at)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			var c *store.SIMCappedError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &c):
				capped = append(capped, c)
			default:
				t.Fatalf("a racing send: %v", err)
			}
		}
		return ok, capped
	}
	ok, capped := race(30, T0)
	if ok != 10 || len(capped) != 20 {
		t.Fatalf("30 racing sends under a cap of 10: %d accepted, %d capped", ok, len(capped))
	}
	for _, c := range capped {
		if c.Slot != "SIM1" || c.What != store.CapPerDay || c.Limit != 10 || c.RetryAfter != 14*time.Hour {
			t.Fatalf("refusal %+v, want SIM1's per_day cap of 10 until midnight", c)
		}
	}
	if _, err := x.direct("cap", "SIM2", "+15554001111", T0); err != nil {
		t.Fatalf("SIM2 has no caps: %v", err)
	}
	us, err := s.SIMUsages(a.ID, "cap", T0)
	if err != nil || us[0].Day != 10 || us[0].Month != 10 || us[1].Day != 1 {
		t.Fatalf("usages: %+v (%v), want 10 on SIM1 and 1 on SIM2", us, err)
	}
	next := T0.Add(14 * time.Hour) // Nov 20, 00:00
	ok, capped = race(5, next)
	if ok != 2 || len(capped) != 3 {
		t.Fatalf("the next day under a month's cap of 12: %d accepted, %d capped", ok, len(capped))
	}
	for _, c := range capped {
		if c.What != store.CapPerMonth || c.RetryAfter != 11*24*time.Hour {
			t.Fatalf("refusal %+v, want the per_month cap until December", c)
		}
	}
	if _, err := s.SetSIMCaps(a.ID, "cap", map[string]store.SIMCaps{"SIM2": {PerDay: 3}}, next); err != nil {
		t.Fatal(err)
	}
	var bulk []store.Message
	for i := range 4 {
		m := x.msg(fmt.Sprintf("+1555410%04d", i))
		m.Device, m.SIMSlot = "cap", "SIM2"
		bulk = append(bulk, m)
	}
	bulkAt := func() time.Time { return next }
	var c *store.SIMCappedError
	if _, _, err := s.EnqueueBulk(bulk, store.IdempotencyKey{}, bulkAt, nil, nil); !errors.As(err, &c) {
		t.Fatalf("a bulk over the cap: %v, want a *SIMCappedError", err)
	}
	if us, _ := s.SIMUsages(a.ID, "cap", next); us[1].Day != 0 {
		t.Fatalf("a refused bulk counted: %+v", us[1])
	}
	if out, _, err := s.EnqueueBulk(bulk[:3], store.IdempotencyKey{}, bulkAt, nil, nil); err != nil || len(out) != 3 {
		t.Fatalf("a bulk that fits: %d (%v)", len(out), err)
	}
	if us, _ := s.SIMUsages(a.ID, "cap", next); us[1].Day != 3 {
		t.Fatalf("after the bulk: %+v, want 3 today", us[1])
	}
}

// simDayAndMonthCapsFull: a SIM at its month's cap and at a day's cap as
// well is refused for the month, until the first of the next month: the
// day's window ends sooner, but at midnight the month's cap still refuses,
// so a retry then would be refused again. A pool of such members answers
// the same wait.
func simDayAndMonthCapsFull(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "dm")
	Device(t, s, a.ID, "dr")
	if _, err := s.SetSIMCaps(a.ID, "dm", map[string]store.SIMCaps{"SIM1": {PerDay: 2, PerMonth: 2}}, T0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetSIMCaps(a.ID, "dr", map[string]store.SIMCaps{"SIM1": {RecipientsPerDay: 1, PerMonth: 1}}, T0); err != nil {
		t.Fatal(err)
	}
	x := poolSender{t, s, a.ID}
	for _, to := range []string{"+15556100001", "+15556100002"} {
		if _, err := x.direct("dm", "SIM1", to, T0); err != nil {
			t.Fatalf("send to %s under the caps: %v", to, err)
		}
	}
	if _, err := x.direct("dr", "SIM1", "+15556100001", T0); err != nil {
		t.Fatalf("send under the caps: %v", err)
	}
	untilDecember := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Sub(T0)
	for _, c := range []struct{ fp, to string }{{"dm", "+15556100003"}, {"dr", "+15556100004"}} {
		var capped *store.SIMCappedError
		if _, err := x.direct(c.fp, "SIM1", c.to, T0); !errors.As(err, &capped) || capped.What != store.CapPerMonth || capped.RetryAfter != untilDecember {
			t.Fatalf("%s at its day's and month's caps: %+v (%v), want the per_month cap until December (%v)", c.fp, capped, err, untilDecember)
		}
	}
	putPool(t, s, a.ID, store.PoolInput{Name: "dm", Strategy: store.PoolRoundRobin, Members: members("dm", "SIM1", "dr", "SIM1")})
	var pc *store.PoolCappedError
	if _, err := x.pool("dm", "+15556100005", T0); !errors.As(err, &pc) || pc.RetryAfter != untilDecember {
		t.Fatalf("a pool whose members are at their months' caps: %+v (%v), want a *PoolCappedError until December", pc, err)
	}
}

// simRecipientsCap: the recipients cap counts distinct recipients a day;
// a known recipient still gets its sends at the cap.
func simRecipientsCap(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "rc")
	if _, err := s.SetSIMCaps(a.ID, "rc", map[string]store.SIMCaps{"SIM1": {RecipientsPerDay: 2}}, T0); err != nil {
		t.Fatal(err)
	}
	x := poolSender{t, s, a.ID}
	for _, to := range []string{"+15555000001", "+15555000002", "+15555000001"} {
		if _, err := x.direct("rc", "SIM1", to, T0); err != nil {
			t.Fatalf("send to %s: %v", to, err)
		}
	}
	var c *store.SIMCappedError
	if _, err := x.direct("rc", "SIM1", "+15555000003", T0); !errors.As(err, &c) || c.What != store.CapRecipientsPerDay || c.Limit != 2 {
		t.Fatalf("a third recipient: %v, want the recipients_per_day cap", err)
	}
	if _, err := x.direct("rc", "SIM1", "+15555000002", T0); err != nil {
		t.Fatalf("a known recipient at the cap: %v", err)
	}
	if us, _ := s.SIMUsages(a.ID, "rc", T0); us[0].Day != 4 || us[0].Recipients != 2 {
		t.Fatalf("usage: %+v, want 4 sends to 2 recipients", us[0])
	}
	if _, err := x.direct("rc", "SIM1", "+15555000003", T0.Add(14*time.Hour)); err != nil {
		t.Fatalf("a new recipient the next day: %v", err)
	}
}

// simRecipientsCapBulk: a bulk send counts its distinct recipients against
// the recipients cap of the SIMs it sends from, with those they sent to
// today already and those earlier in the request, to a device or through
// a pool: a recipient counts once however often it is named, a known one
// passes at the cap, and one new recipient past the cap refuses the whole
// request, which counts nothing.
func simRecipientsCapBulk(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	for _, fp := range []string{"rb", "rb-a", "rb-b"} {
		Device(t, s, a.ID, fp)
		if _, err := s.SetSIMCaps(a.ID, fp, map[string]store.SIMCaps{"SIM1": {RecipientsPerDay: 4}}, T0); err != nil {
			t.Fatal(err)
		}
	}
	putPool(t, s, a.ID, store.PoolInput{Name: "rb", Strategy: store.PoolRoundRobin, Members: members("rb-a", "SIM1", "rb-b", "SIM1")})
	x := poolSender{t, s, a.ID}
	phone := func(i int) string { return fmt.Sprintf("+155542%05d", i) }
	bulk := func(device, pool string, at time.Time, to ...int) ([]store.Message, error) {
		ms := make([]store.Message, len(to))
		for i, p := range to {
			ms[i] = x.msg(phone(p))
			ms[i].Device, ms[i].SIMSlot, ms[i].Pool = device, "SIM1", pool
		}
		out, _, err := s.EnqueueBulk(ms, store.IdempotencyKey{}, func() time.Time { return at }, nil, nil)
		return out, err
	}
	usage := func(fp string) store.SIMUsage {
		t.Helper()
		us, err := s.SIMUsages(a.ID, fp, T0)
		if err != nil {
			t.Fatal(err)
		}
		return us[0]
	}
	capped := func(name string, err error) {
		t.Helper()
		var c *store.SIMCappedError
		if !errors.As(err, &c) || c.What != store.CapRecipientsPerDay || c.Limit != 4 {
			t.Fatalf("%s: %v, want the recipients_per_day cap", name, err)
		}
	}
	// To a device: one known today, two new ones named twice each.
	if _, err := x.direct("rb", "SIM1", phone(1), T0); err != nil {
		t.Fatal(err)
	}
	if out, err := bulk("rb", "", T0, 1, 2, 3, 2, 1, 3); err != nil || len(out) != 6 {
		t.Fatalf("a bulk to 3 recipients, 1 known, at a cap of 4: %d (%v)", len(out), err)
	}
	if u := usage("rb"); u.Day != 7 || u.Recipients != 3 {
		t.Fatalf("after the bulk: %d sends to %d recipients, want 7 to 3", u.Day, u.Recipients)
	}
	_, err := bulk("rb", "", T0, 1, 4, 5, 2)
	capped("a bulk with two new recipients, one place left", err)
	if u := usage("rb"); u.Day != 7 || u.Recipients != 3 {
		t.Fatalf("a refused bulk counted: %d sends to %d recipients", u.Day, u.Recipients)
	}
	if out, err := bulk("rb", "", T0, 3, 4, 1, 4, 2); err != nil || len(out) != 5 {
		t.Fatalf("a bulk with one new recipient, one place left: %d (%v)", len(out), err)
	}
	if out, err := bulk("rb", "", T0, 4, 3, 2, 1); err != nil || len(out) != 4 {
		t.Fatalf("a bulk to known recipients at the cap: %d (%v)", len(out), err)
	}
	_, err = bulk("rb", "", T0, 1, 6)
	capped("a bulk with a new recipient at the cap", err)
	if u := usage("rb"); u.Day != 16 || u.Recipients != 4 {
		t.Fatalf("at the cap: %d sends to %d recipients, want 16 to 4", u.Day, u.Recipients)
	}
	// Through a pool of two SIMs of 4 each: 8 recipients fit, alternating
	// members; a ninth does not.
	out, err := bulk("", "rb", T0, 10, 11, 12, 13, 14, 15, 16, 17)
	if err != nil || len(out) != 8 {
		t.Fatalf("a bulk to 8 recipients through a pool of two SIMs of 4: %d (%v)", len(out), err)
	}
	if a, b := usage("rb-a"), usage("rb-b"); a.Recipients != 4 || b.Recipients != 4 {
		t.Fatalf("the pool's members: %d and %d recipients, want 4 each", a.Recipients, b.Recipients)
	}
	var pc *store.PoolCappedError
	if _, err = bulk("", "rb", T0, 10, 18); !errors.As(err, &pc) || pc.Pool != "rb" {
		t.Fatalf("a pool bulk with a ninth recipient: %v, want a *PoolCappedError", err)
	}
	if a, b := usage("rb-a"), usage("rb-b"); a.Day+b.Day != 8 {
		t.Fatalf("a refused pool bulk counted: %d sends", a.Day+b.Day)
	}
	next := T0.Add(14 * time.Hour) // the next day
	if out, err := bulk("rb", "", next, 5, 6, 7, 8); err != nil || len(out) != 4 {
		t.Fatalf("4 new recipients the next day: %d (%v)", len(out), err)
	}
}

// poolCapped: a pool passes over members at their caps; when every member
// that could send is capped, the send is a *PoolCappedError with the
// soonest retry.
func poolCapped(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "pc-a")
	Device(t, s, a.ID, "pc-b")
	for _, fp := range []string{"pc-a", "pc-b"} {
		if _, err := s.SetSIMCaps(a.ID, fp, map[string]store.SIMCaps{"SIM1": {PerDay: 1}}, T0); err != nil {
			t.Fatal(err)
		}
	}
	putPool(t, s, a.ID, store.PoolInput{Name: "pc", Strategy: store.PoolRoundRobin, Members: members("pc-a", "SIM1", "pc-b", "SIM1")})
	x := poolSender{t, s, a.ID}
	got := map[string]bool{}
	for i := range 2 {
		got[x.via("pc", fmt.Sprintf("+1555600000%d", i), T0)] = true
	}
	if !got["pc-a/SIM1"] || !got["pc-b/SIM1"] {
		t.Fatalf("two sends: %v, want one from each member", got)
	}
	var pc *store.PoolCappedError
	if _, err := x.pool("pc", "+15556000009", T0); !errors.As(err, &pc) || pc.Pool != "pc" || pc.RetryAfter != 14*time.Hour || len(pc.Reasons) != 2 {
		t.Fatalf("every member capped: %v, want a *PoolCappedError until midnight", err)
	}
	if us, _ := s.SIMUsages(a.ID, "pc-a", T0); us[0].Day != 1 {
		t.Fatalf("a refused send counted: %+v", us[0])
	}
}

// simCountsPruned: the per-SIM counts of past days and months and the
// recipients of past days are pruned; today's stay, and so do the caps.
func simCountsPruned(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "pr")
	day1 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	if _, err := s.SetSIMCaps(a.ID, "pr", map[string]store.SIMCaps{"SIM1": {PerDay: 5, RecipientsPerDay: 5}}, day1); err != nil {
		t.Fatal(err)
	}
	x := poolSender{t, s, a.ID}
	send := func(at time.Time, to string) {
		t.Helper()
		if _, err := x.direct("pr", "SIM1", to, at); err != nil {
			t.Fatal(err)
		}
	}
	send(day1, "+15557000001")
	send(day1, "+15557000002")
	day2 := day1.Add(24 * time.Hour) // December 1st: a new day and a new month
	send(day2, "+15557000001")
	if n, err := s.PruneSIMCounts(day2); err != nil || n == 0 {
		t.Fatalf("pruned %d (%v), want day 1's counts and recipients", n, err)
	}
	if n, err := s.PruneSIMCounts(day2); err != nil || n != 0 {
		t.Fatalf("pruned again %d (%v), want none", n, err)
	}
	us, err := s.SIMUsages(a.ID, "pr", day2)
	if err != nil || us[0].Day != 1 || us[0].Month != 1 || us[0].Recipients != 1 || us[0].Caps.PerDay != 5 {
		t.Fatalf("after pruning: %+v (%v), want today's counts and the caps kept", us, err)
	}
}

// carrierErrors: a SIM whose sends failed store.CarrierErrorStreak times
// in a row with a carrier error is failing, and its pools pass it over,
// until the cool-down after its last failure ends or a send from it goes
// out; a failure that speaks of the message breaks no streak.
func carrierErrors(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	da := Device(t, s, a.ID, "ce-a")
	Device(t, s, a.ID, "ce-b")
	putPool(t, s, a.ID, store.PoolInput{Name: "ce", Strategy: store.PoolRoundRobin, Members: members("ce-a", "SIM1", "ce-b", "SIM1")})
	x := poolSender{t, s, a.ID}
	report := func(status, errText string, at time.Time) {
		t.Helper()
		m, err := x.direct("ce-a", "SIM1", "+15558000001", at)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Transition(a.ID, da.ID, m.UUID, status, errText, "", at); err != nil {
			t.Fatal(err)
		}
	}
	for range store.CarrierErrorStreak - 1 {
		report(store.MsgFailed, "no_service", T0)
	}
	report(store.MsgFailed, "invalid_number", T0) // the message's fault: no carrier error, no reset either
	if f, err := s.CarrierFailing(a.ID, T0); err != nil || len(f) != 0 {
		t.Fatalf("after %d carrier errors: %v (%v), want none failing", store.CarrierErrorStreak-1, f, err)
	}
	at := T0.Add(time.Minute)
	report(store.MsgFailed, "generic_failure", at)
	if f, err := s.CarrierFailing(a.ID, at); err != nil || len(f) != 1 || !slices.Equal(f[da.ID], []string{"SIM1"}) {
		t.Fatalf("after %d carrier errors in a row: %v (%v), want ce-a's SIM1", store.CarrierErrorStreak, f, err)
	}
	b, _ := Company(t, s)
	if f, _ := s.CarrierFailing(b.ID, at); len(f) != 0 {
		t.Fatalf("another company's failing SIMs: %v, want none", f)
	}
	for i := range 3 {
		if got := x.via("ce", fmt.Sprintf("+1555801000%d", i), at); got != "ce-b/SIM1" {
			t.Fatalf("send %d went from %s, want ce-b while ce-a's SIM1 fails", i, got)
		}
	}
	cooled := at.Add(store.CarrierErrorCooldown)
	if f, _ := s.CarrierFailing(a.ID, cooled); len(f) != 0 {
		t.Fatalf("after the cool-down: %v, want none failing", f)
	}
	report(store.MsgFailed, "no_service", at) // the streak goes on: 4
	report(store.MsgSent, "", at)
	if f, _ := s.CarrierFailing(a.ID, at); len(f) != 0 {
		t.Fatalf("after a send went out: %v, want the streak ended", f)
	}
}

// deletedDeviceSIMs: a deleted device's SIMs' caps, counts, recipients and
// carrier-error streak go with it: its SIM is no longer failing, no prune
// finds a count of it, and a phone paired again under its fingerprint (a new
// device) starts without caps, counts or streak.
func deletedDeviceSIMs(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	d := Device(t, s, a.ID, "dd-a")
	if _, err := s.SetSIMCaps(a.ID, "dd-a", map[string]store.SIMCaps{"SIM1": {PerDay: 50, PerMonth: 500, RecipientsPerDay: 50}, "SIM2": {PerDay: 7}}, T0); err != nil {
		t.Fatal(err)
	}
	x := poolSender{t, s, a.ID}
	for i := range store.CarrierErrorStreak {
		m, err := x.direct("dd-a", "SIM1", fmt.Sprintf("+1555900000%d", i), T0)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Transition(a.ID, d.ID, m.UUID, store.MsgFailed, "no_service", "", T0); err != nil {
			t.Fatal(err)
		}
	}
	if f, err := s.CarrierFailing(a.ID, T0); err != nil || !slices.Equal(f[d.ID], []string{"SIM1"}) {
		t.Fatalf("before the deletion: %v (%v), want dd-a's SIM1 failing", f, err)
	}
	if us, err := s.SIMUsages(a.ID, "dd-a", T0); err != nil || us[0].Day != store.CarrierErrorStreak || us[0].Recipients != store.CarrierErrorStreak {
		t.Fatalf("before the deletion: %+v (%v), want SIM1's sends counted", us, err)
	}
	if _, err := s.DeleteDevice(a.ID, "dd-a", T0); err != nil {
		t.Fatal(err)
	}
	if f, err := s.CarrierFailing(a.ID, T0); err != nil || len(f) != 0 {
		t.Fatalf("after the deletion: %v (%v), want no SIM failing", f, err)
	}
	again := Device(t, s, a.ID, "dd-a")
	if again.ID == d.ID {
		t.Fatalf("paired again under its fingerprint: id %d, the deleted device's", again.ID)
	}
	us, err := s.SIMUsages(a.ID, "dd-a", T0)
	if err != nil || len(us) != 2 {
		t.Fatalf("the new device's SIMs: %+v (%v)", us, err)
	}
	for _, u := range us {
		if u.Caps != (store.SIMCaps{}) || u.Day != 0 || u.Month != 0 || u.Recipients != 0 {
			t.Errorf("the new device's %s: %+v, want no caps and no counts", u.Slot, u)
		}
	}
	if f, err := s.CarrierFailing(a.ID, T0); err != nil || len(f) != 0 {
		t.Fatalf("the new device: %v (%v), want no SIM failing", f, err)
	}
	// Two months on, every count of the day and month is past: none of the
	// deleted device's is left to prune.
	if n, err := s.PruneSIMCounts(T0.AddDate(0, 2, 0)); err != nil || n != 0 {
		t.Fatalf("prune after the deletion: %d (%v), want nothing left of the deleted device", n, err)
	}
}

// poolFailover: Failover moves the queued jobs a pool placed on a member
// to another member (recording the member left in their attempts), never a
// job sent to the device by name, nor to a member on a down device, at
// most Limit of them.
func poolFailover(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	da := Device(t, s, a.ID, "fo-a")
	db := Device(t, s, a.ID, "fo-b")
	Device(t, s, a.ID, "fo-c")
	p := putPool(t, s, a.ID, store.PoolInput{Name: "fo", Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: members("fo-a", "SIM1", "fo-b", "SIM1")})
	x := poolSender{t, s, a.ID}
	var onA []string
	for i := range 6 {
		m, err := x.pool("fo", fmt.Sprintf("+155590000%02d", i), T0)
		if err != nil {
			t.Fatal(err)
		}
		if m.DeviceID == da.ID {
			onA = append(onA, m.UUID)
		}
	}
	direct, err := x.direct("fo-a", "SIM1", "+15559001000", T0)
	if err != nil {
		t.Fatal(err)
	}
	at := T0.Add(2 * time.Minute)
	in := store.FailoverInput{CompanyID: a.ID, DeviceID: da.ID, Reason: store.FailoverOffline, Pools: map[uint64]bool{p.ID: true}, Limit: 2,
		Down: map[uint64]bool{db.ID: true}}
	if moved, next, err := s.Failover(in, nil, at); err != nil || len(moved) != 0 || next == 0 {
		t.Fatalf("with the only other member down: %d moved (%v), next batch from %d, want none moved and a place to go on from", len(moved), err, next)
	}
	in.Down = nil
	if moved, _, err := s.Failover(store.FailoverInput{CompanyID: a.ID, DeviceID: da.ID, Reason: store.FailoverOffline, Pools: map[uint64]bool{p.ID + 1000: true}, Limit: 10}, nil, at); err != nil || len(moved) != 0 {
		t.Fatalf("for another pool: %d moved (%v), want none", len(moved), err)
	}
	moved, next, err := s.Failover(in, nil, at)
	if err != nil || len(moved) != 2 || next == 0 {
		t.Fatalf("failover with a limit of 2: %d moved (%v), next batch from %d", len(moved), err, next)
	}
	more, next, err := s.Failover(store.FailoverInput{CompanyID: a.ID, DeviceID: da.ID, Reason: store.FailoverOffline, Pools: map[uint64]bool{p.ID: true}, Limit: 10}, nil, at)
	if err != nil || len(more) != len(onA)-2 || next != 0 {
		t.Fatalf("the rest: %d moved (%v), want %d; next batch from %d, want 0 (no more)", len(more), err, len(onA)-2, next)
	}
	for _, m := range append(moved, more...) {
		if m.Device != "fo-b" || m.DeviceID != db.ID || m.SIMSlot != "SIM1" || m.Status != store.MsgQueued || m.PoolID != p.ID ||
			len(m.Attempts) != 1 || m.Attempts[0] != (store.Attempt{Device: "fo-a", SIMSlot: "SIM1", Reason: store.FailoverOffline, MovedAt: at}) {
			t.Fatalf("moved: %+v, want queued on fo-b with fo-a's attempt", m)
		}
	}
	for _, uuid := range onA {
		if m, err := s.MessageByUUID(a.ID, uuid); err != nil || m.Device != "fo-b" || len(m.Attempts) != 1 {
			t.Fatalf("stored after the move: %+v (%v)", m, err)
		}
	}
	if m, err := s.MessageByUUID(a.ID, direct.UUID); err != nil || m.Device != "fo-a" || len(m.Attempts) != 0 {
		t.Fatalf("a send that named fo-a: %+v (%v), want it kept there", m, err)
	}
	if moved, _, err := s.Failover(in, nil, at); err != nil || len(moved) != 0 {
		t.Fatalf("a second sweep: %d moved (%v), want none", len(moved), err)
	}
}

// poolFailoverBatches: a device's jobs move batch after batch, each batch
// going on from the place the one before it returned, in queue order, each
// job once: the new SIM's recipients cap counts across the batches (a
// recipient it took in an earlier batch, or earlier in the batch, is no
// new one), the jobs it cannot take stay behind on their device and are
// passed, and the last batch says there are no more.
func poolFailoverBatches(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	da := Device(t, s, a.ID, "fbt-a")
	db := Device(t, s, a.ID, "fbt-b")
	p := putPool(t, s, a.ID, store.PoolInput{Name: "fbt", Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: members("fbt-a", "SIM1")})
	x := poolSender{t, s, a.ID}
	phones := []string{"+15559003000", "+15559003000", "+15559003001", "+15559003002", "+15559003001", "+15559003003", "+15559003004"}
	var queued []store.Message
	for _, ph := range phones {
		m, err := x.pool("fbt", ph, T0)
		if err != nil || m.DeviceID != da.ID {
			t.Fatalf("send to %s: %+v (%v), want it on fbt-a", ph, m, err)
		}
		queued = append(queued, m)
	}
	if _, err := s.PutPool(a.ID, p.ID, T0, func(store.Pool) (store.PoolInput, error) {
		return store.PoolInput{Name: "fbt", Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: members("fbt-a", "SIM1", "fbt-b", "SIM1")}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetSIMCaps(a.ID, "fbt-b", map[string]store.SIMCaps{"SIM1": {RecipientsPerDay: 3}}, T0); err != nil {
		t.Fatal(err)
	}
	at := T0.Add(2 * time.Minute)
	var moved []store.Message
	var after uint64
	batches := 0
	for ; batches < 10; batches++ {
		ms, next, err := s.Failover(store.FailoverInput{CompanyID: a.ID, DeviceID: da.ID, After: after, Reason: store.FailoverOffline,
			Pools: map[uint64]bool{p.ID: true}, Limit: 2}, nil, at)
		if err != nil {
			t.Fatalf("batch %d: %v", batches+1, err)
		}
		moved = append(moved, ms...)
		if next == 0 {
			break
		}
		if next <= after {
			t.Fatalf("batch %d went on from %d, the one before from %d", batches+1, next, after)
		}
		after = next
	}
	if batches+1 != 4 {
		t.Fatalf("%d batches of 2 for 7 jobs, want 4", batches+1)
	}
	// The first five: the cap of 3 takes 000, 001 and 002, and 000 and 001
	// again; 003 and 004 would be its fourth and fifth.
	if len(moved) != 5 {
		t.Fatalf("%d jobs moved, want 5", len(moved))
	}
	for i, m := range moved {
		if m.UUID != queued[i].UUID || m.DeviceID != db.ID || len(m.Attempts) != 1 {
			t.Fatalf("moved %d: %s on %d with %d attempts, want %s (queue order) on fbt-b with one", i, m.UUID, m.DeviceID, len(m.Attempts), queued[i].UUID)
		}
		if i > 0 && m.QueueSeq <= moved[i-1].QueueSeq {
			t.Fatalf("moved %d took place %d, behind the one before it (%d): want queue order kept", i, m.QueueSeq, moved[i-1].QueueSeq)
		}
	}
	for i, q := range queued {
		m, err := s.MessageByUUID(a.ID, q.UUID)
		switch {
		case err != nil:
			t.Fatal(err)
		case i < 5 && (m.DeviceID != db.ID || m.QueueSeq != moved[i].QueueSeq || len(m.Attempts) != 1):
			t.Fatalf("stored %d: %+v, want it on fbt-b at %d, moved once", i, m, moved[i].QueueSeq)
		case i >= 5 && (m.DeviceID != da.ID || m.QueueSeq != q.QueueSeq || len(m.Attempts) != 0):
			t.Fatalf("stored %d: %+v, want it left on fbt-a at %d", i, m, q.QueueSeq)
		}
	}
	if us, err := s.SIMUsages(a.ID, "fbt-b", at); err != nil || us[0].Recipients != 3 || us[0].Day != 5 {
		t.Fatalf("fbt-b's SIM1: %+v (%v), want 3 recipients and 5 sends", us, err)
	}
}

// poolFailoverTwoPools: one failover of a device's jobs of two pools that
// share the member they move to counts each job once against that SIM's
// caps, as sends through the two pools would.
func poolFailoverTwoPools(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	da := Device(t, s, a.ID, "f2p-a")
	Device(t, s, a.ID, "f2p-b")
	x := poolSender{t, s, a.ID}
	pools := map[uint64]bool{}
	for _, name := range []string{"f2p-1", "f2p-2"} {
		p := putPool(t, s, a.ID, store.PoolInput{Name: name, Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: members("f2p-a", "SIM1")})
		pools[p.ID] = true
		for i := range 2 {
			x.via(name, fmt.Sprintf("+15559004%s%d", name[4:], i), T0)
		}
		if _, err := s.PutPool(a.ID, p.ID, T0, func(store.Pool) (store.PoolInput, error) {
			return store.PoolInput{Name: name, Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: members("f2p-a", "SIM1", "f2p-b", "SIM1")}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SetSIMCaps(a.ID, "f2p-b", map[string]store.SIMCaps{"SIM1": {PerDay: 100, RecipientsPerDay: 100}}, T0); err != nil {
		t.Fatal(err)
	}
	at := T0.Add(2 * time.Minute)
	moved, _, err := s.Failover(store.FailoverInput{CompanyID: a.ID, DeviceID: da.ID, Reason: store.FailoverOffline, Pools: pools, Limit: 10}, nil, at)
	if err != nil || len(moved) != 4 {
		t.Fatalf("failover of two pools' jobs: %d moved (%v), want 4", len(moved), err)
	}
	if us, err := s.SIMUsages(a.ID, "f2p-b", at); err != nil || us[0].Day != 4 || us[0].Month != 4 || us[0].Recipients != 4 {
		t.Fatalf("f2p-b's SIM1 after 4 jobs moved to it: %+v (%v), want 4 sends today and this month, to 4 recipients", us, err)
	}
}

// poolFailoverAttemptsBounded: a job that keeps moving (its pool's phones
// keep dropping in turn) keeps its latest store.MaxAttempts moves, oldest
// first, so its record does not grow with every move.
func poolFailoverAttemptsBounded(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	devs := map[string]store.Device{"fb-a": Device(t, s, a.ID, "fb-a"), "fb-b": Device(t, s, a.ID, "fb-b")}
	p := putPool(t, s, a.ID, store.PoolInput{Name: "fb", Strategy: store.PoolRoundRobin, FailoverAfter: time.Minute, Members: members("fb-a", "SIM1", "fb-b", "SIM1")})
	x := poolSender{t, s, a.ID}
	m, err := x.pool("fb", "+15559002000", T0)
	if err != nil {
		t.Fatal(err)
	}
	const moves = store.MaxAttempts + 5
	for i := range moves {
		at := T0.Add(time.Duration(i+1) * time.Minute)
		moved, _, err := s.Failover(store.FailoverInput{CompanyID: a.ID, DeviceID: devs[m.Device].ID, Reason: store.FailoverOffline, Pools: map[uint64]bool{p.ID: true}, Limit: 10}, nil, at)
		if err != nil || len(moved) != 1 || moved[0].UUID != m.UUID || moved[0].Device == m.Device {
			t.Fatalf("move %d off %s: %+v (%v), want the job moved to the other member", i+1, m.Device, moved, err)
		}
		m = moved[0]
	}
	got, err := s.MessageByUUID(a.ID, m.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Attempts) != store.MaxAttempts {
		t.Fatalf("after %d moves: %d attempts kept, want %d", moves, len(got.Attempts), store.MaxAttempts)
	}
	for i, at := range got.Attempts {
		want := T0.Add(time.Duration(moves-store.MaxAttempts+i+1) * time.Minute)
		if !at.MovedAt.Equal(want) || at.Reason != store.FailoverOffline {
			t.Fatalf("attempt %d of those kept: %+v, want a move at %v (the newest %d, oldest first)", i, at, want, store.MaxAttempts)
		}
	}
}

// poolWindow: a send through a pool with a window takes the pool's window
// unless it has its own, and its time to live counts from the window's
// first opening unless its end was fixed.
func poolWindow(t *testing.T, s PoolSendsStore) {
	a, _ := Company(t, s)
	Device(t, s, a.ID, "pw")
	noon := window.Window{From: "12:00", To: "13:00", TimeZone: "UTC"} // opens 2 hours after T0
	putPool(t, s, a.ID, store.PoolInput{Name: "pw", Strategy: store.PoolRoundRobin, Window: &noon, Members: members("pw", "SIM1")})
	x := poolSender{t, s, a.ID}
	enqueue := func(w *window.Window, expires time.Time, fixed bool) (store.Message, error) {
		m := x.msg("+15559100001")
		m.Pool, m.Window, m.ExpiresAt, m.ExpiresFixed = "pw", w, expires, fixed
		out, _, err := s.Enqueue(&m, store.IdempotencyKey{}, func() time.Time { return T0 }, nil, nil)
		return out, err
	}
	send := func(w *window.Window, fixed bool) store.Message {
		t.Helper()
		expires := T0.Add(time.Hour)
		if fixed {
			expires = T0.Add(150 * time.Minute) // after the pool's window opens
		}
		out, err := enqueue(w, expires, fixed)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if m := send(nil, false); m.Window == nil || m.Window.From != "12:00" || !m.ExpiresAt.Equal(T0.Add(3*time.Hour)) {
		t.Fatalf("through the pool: window %+v, expires %v; want the pool's window, an hour after it opens", m.Window, m.ExpiresAt)
	}
	if m := send(nil, true); m.Window == nil || !m.ExpiresAt.Equal(T0.Add(150*time.Minute)) {
		t.Fatalf("a fixed end: window %+v, expires %v; want the pool's window and the end kept", m.Window, m.ExpiresAt)
	}
	// A fixed end at or before the pool's window first opens could only
	// expire: refused, nothing stored, as a send's own window is by the
	// service before the store.
	before, _ := s.SIMUsages(a.ID, "pw", T0)
	for _, end := range []time.Time{T0.Add(time.Hour), T0.Add(2 * time.Hour)} {
		var eb *store.ExpiresBeforeWindowError
		if _, err := enqueue(nil, end, true); !errors.As(err, &eb) || eb.Pool != "pw" || !eb.Opening.Equal(T0.Add(2*time.Hour)) {
			t.Fatalf("a fixed end at %v, the pool's window opening at %v: %v, want an *ExpiresBeforeWindowError", end, T0.Add(2*time.Hour), err)
		}
	}
	if after, _ := s.SIMUsages(a.ID, "pw", T0); after[0].Day != before[0].Day {
		t.Fatalf("refused sends counted on the SIM: %d, want %d", after[0].Day, before[0].Day)
	}
	own := window.Window{From: "18:00", To: "19:00", TimeZone: "UTC"}
	if m := send(&own, false); m.Window == nil || m.Window.From != "18:00" || !m.ExpiresAt.Equal(T0.Add(time.Hour)) {
		t.Fatalf("a send's own window: %+v, expires %v; want it kept, as its end", m.Window, m.ExpiresAt)
	}
}
