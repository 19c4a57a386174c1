package store

import (
	"slices"
	"testing"
)

// MemberOrder starts at the turn and wraps; least_loaded puts the fewest
// queued jobs first and keeps the turn's order among equals.
func TestMemberOrder(t *testing.T) {
	t.Parallel()
	if got := MemberOrder(4, 6, nil); !slices.Equal(got, []int{2, 3, 0, 1}) {
		t.Errorf("round robin from turn 6 of 4: %v, want [2 3 0 1]", got)
	}
	load := []int{5, 0, 5, 0}
	if got := MemberOrder(4, 2, func(i int) int { return load[i] }); !slices.Equal(got, []int{3, 1, 2, 0}) {
		t.Errorf("least loaded from turn 2: %v, want [3 1 2 0]", got)
	}
}
