package store

import (
	"slices"
	"testing"
)

type kindsOnly []Kind

func (k kindsOnly) DumpKinds() []Kind                           { return k }
func (k kindsOnly) LoadKinds() []Kind                           { return k }
func (kindsOnly) Dump(func(CopyRecord) error) error             { return nil }
func (kindsOnly) Load(func(func(CopyRecord) error) error) error { return nil }
func (kindsOnly) CopyCounts() (map[Kind]int64, error)           { return nil, nil }

// A copy would leave behind the kinds the source holds that either side
// cannot move, named in Kinds' order; kinds the source does not hold never
// stop it.
func TestUncopied(t *testing.T) {
	t.Parallel()
	counts := map[Kind]int64{KindCompanies: 2, KindMessages: 10, KindMedia: 1, KindMail: 0}
	src := kindsOnly{KindCompanies, KindMessages, KindMail}
	dst := kindsOnly{KindCompanies, KindMedia, KindMail}
	got := Uncopied(counts, src, dst)
	if want := []Kind{KindMessages, KindMedia}; !slices.Equal(got, want) {
		t.Errorf("Uncopied: %v, want %v", got, want)
	}
	if got := Uncopied(counts, kindsOnly(Kinds), kindsOnly(Kinds)); len(got) != 0 {
		t.Errorf("Uncopied with every kind on both sides: %v", got)
	}
	for kinds, want := range map[string]string{
		"":        "",
		"a":       "a",
		"a,b":     "a and b",
		"a,b,c,d": "a, b, c and d",
	} {
		var ks []Kind
		for _, r := range kinds {
			if r != ',' {
				ks = append(ks, Kind(r))
			}
		}
		if got := KindList(ks); got != want {
			t.Errorf("KindList(%q) = %q, want %q", kinds, got, want)
		}
	}
}

// Every kind is named once, and each record type names its kind.
func TestKinds(t *testing.T) {
	t.Parallel()
	seen := map[Kind]bool{}
	for _, k := range Kinds {
		if k == "" || seen[k] {
			t.Errorf("kind %q is empty or listed twice", k)
		}
		seen[k] = true
	}
	for _, r := range []CopyRecord{CopyCompany{}, CopyUser{}, CopyDevice{}, CopyMessage{}, CopyMessage{Message: Message{Channel: ChannelNameWhatsApp}},
		CopyWebhookEvent{}, CopyMediaChunk{}, CopySIMStreak{}, CopyAgentSend{}} {
		if !seen[r.CopyKind()] {
			t.Errorf("%T names kind %q, not one of Kinds", r, r.CopyKind())
		}
	}
	if k := (CopyMessage{Message: Message{Channel: ChannelNameIMessage}}).CopyKind(); k != KindAgentMessages {
		t.Errorf("an iMessage message is of kind %q", k)
	}
}
