package clientgone_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/simrelay/simrelay/internal/clientgone"
)

func TestIs(t *testing.T) {
	t.Parallel()
	live := httptest.NewRequest("GET", "/", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := live.WithContext(ctx)
	for _, tc := range []struct {
		name string
		gone bool
		err  error
		want bool
	}{
		{"canceled, client gone", true, context.Canceled, true},
		{"canceled wrapped, client gone", true, fmt.Errorf("store: device 1: %w", context.Canceled), true},
		{"canceled, client still waits", false, context.Canceled, false},
		{"other error, client gone", true, errors.New("disk on fire"), false},
		{"deadline, client gone", true, context.DeadlineExceeded, false},
		{"no error, client gone", true, nil, false},
	} {
		r := live
		if tc.gone {
			r = gone
		}
		if got := clientgone.Is(r, tc.err); got != tc.want {
			t.Errorf("%s: Is = %v, want %v", tc.name, got, tc.want)
		}
	}
}
