package sms

import (
	"context"

	"github.com/simrelay/simrelay/store"
)

// FailoverUntil runs one failover sweep that stops when ctx ends, as the
// sweep of Run does.
func (s *Service) FailoverUntil(ctx context.Context) []store.Message { return s.failover(ctx) }
