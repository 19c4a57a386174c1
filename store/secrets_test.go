package store

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// ReplaceSecrets replaces each name held once, in the order given, with
// fresh bytes as long as the old; a name not held is left alone.
func TestReplaceSecrets(t *testing.T) {
	t.Parallel()
	held := map[string][]byte{"jwt": bytes.Repeat([]byte{1}, 32), "seal": bytes.Repeat([]byte{2}, 16)}
	before := map[string][]byte{"jwt": bytes.Clone(held["jwt"]), "seal": bytes.Clone(held["seal"])}
	writes := 0
	replaced, old, fresh, err := ReplaceSecrets([]string{"seal", "missing", "jwt", "seal"},
		func(name string) ([]byte, bool, error) {
			v, ok := held[name]
			return bytes.Clone(v), ok, nil
		},
		func(name string, v []byte) error {
			writes++
			held[name] = v
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(replaced, []string{"seal", "jwt"}) || writes != 2 {
		t.Fatalf("replaced %q in %d writes, want [seal jwt] in 2", replaced, writes)
	}
	for _, name := range replaced {
		if !bytes.Equal(old[name], before[name]) {
			t.Errorf("%s: old bytes %x, want %x", name, old[name], before[name])
		}
		if len(fresh[name]) != len(before[name]) || bytes.Equal(fresh[name], before[name]) || !bytes.Equal(held[name], fresh[name]) {
			t.Errorf("%s: fresh %x, stored %x; want %d new bytes, stored", name, fresh[name], held[name], len(before[name]))
		}
	}
	if _, ok := old["missing"]; ok {
		t.Error("a name not held has old bytes")
	}

	boom := errors.New("boom")
	if _, _, _, err := ReplaceSecrets([]string{"jwt"}, func(string) ([]byte, bool, error) { return nil, false, boom }, nil); !errors.Is(err, boom) {
		t.Errorf("read's error: %v, want %v", err, boom)
	}
	if _, _, _, err := ReplaceSecrets([]string{"jwt"}, func(string) ([]byte, bool, error) { return []byte{1}, true, nil },
		func(string, []byte) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("write's error: %v, want %v", err, boom)
	}
}

// ResealKeys re-seals every company with a sealed key and stores it, keeps
// and names those whose key does not open, and passes over those with no
// sealed key; any other error of reseal's names its company.
func TestResealKeys(t *testing.T) {
	t.Parallel()
	old, fresh := map[string][]byte{"seal": {1}}, map[string][]byte{"seal": {2}}
	reseal := func(o, f map[string][]byte, sealed []byte) ([]byte, error) {
		if o["seal"][0] != 1 || f["seal"][0] != 2 {
			t.Errorf("reseal given old %v, fresh %v", o, f)
		}
		switch string(sealed) {
		case "corrupt":
			return nil, ErrSealedUnopened
		case "fails":
			return nil, errors.New("seal broken")
		}
		return append([]byte("new-"), sealed...), nil
	}
	companies := []Company{{ID: 1, APIKeySealed: []byte("a")}, {ID: 2}, {ID: 3, APIKeySealed: []byte("corrupt")}, {ID: 4, APIKeySealed: []byte("b")}}
	var put []Company
	resealed, unopened, err := ResealKeys(companies, old, fresh, reseal, func(c Company) error {
		put = append(put, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if resealed != 2 || len(put) != 2 || put[0].ID != 1 || string(put[0].APIKeySealed) != "new-a" || put[1].ID != 4 || string(put[1].APIKeySealed) != "new-b" {
		t.Errorf("resealed %d, stored %+v; want companies 1 and 4 re-sealed", resealed, put)
	}
	if len(unopened) != 1 || unopened[0].ID != 3 || string(unopened[0].APIKeySealed) != "corrupt" {
		t.Errorf("unopened %+v, want company 3 as it was", unopened)
	}
	if string(companies[0].APIKeySealed) != "a" {
		t.Errorf("the companies given were changed: %q", companies[0].APIKeySealed)
	}

	_, _, err = ResealKeys([]Company{{ID: 7, APIKeySealed: []byte("fails")}}, old, fresh, reseal, func(Company) error { return nil })
	if err == nil || err.Error() != "company 7: seal broken" {
		t.Errorf("reseal's error: %v, want it to name company 7", err)
	}
	boom := errors.New("boom")
	if _, _, err := ResealKeys(companies[:1], old, fresh, reseal, func(Company) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("put's error: %v, want %v", err, boom)
	}
}
