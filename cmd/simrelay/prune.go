package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/cluster"
	"github.com/simrelay/simrelay/store"
)

// How long the store keeps what has done its job; the sweep drops the rest.
const (
	// pruneStoreEvery spaces the store's prunes: each scans a bucket, and
	// nothing they drop is urgent.
	pruneStoreEvery = time.Hour
	// pairingKeep keeps an expired pairing code a day, so a phone that
	// comes back with it is told "expired" rather than "unknown" for a while.
	pairingKeep = 24 * time.Hour
	// mailKeepDone keeps sent (and, without SMTP, logged) mail a week: long
	// enough to answer "did the invitation go out?" with `simrelay admin
	// mail`; the links in it expire sooner.
	mailKeepDone = 7 * 24 * time.Hour
	// mailKeepUnsent keeps mail that never went (pending or failed) 30 days,
	// long after its retries ended, then drops it with a warning per mail.
	mailKeepUnsent = 30 * 24 * time.Hour
	// storageCountersKeep keeps yesterday's storage counters for a look by
	// the operator; only today's is consulted.
	storageCountersKeep = 24 * time.Hour
	// billingEventsKeep keeps the ids of the payment provider's events
	// applied, against a second delivery of one, for 45 days: Stripe
	// retries a webhook for up to 3 days and lets an event be resent by hand
	// for 30, so no copy of an event comes after its id is gone.
	billingEventsKeep = 45 * 24 * time.Hour
	// abandonedSignupKeep keeps a sign-up whose owner never verified the
	// address for 7 days after its verification link expired
	// (account.DefaultVerifyTTL, 24 hours), 8 days in all: then, if nothing
	// else was ever made under it (store.SignupOwnerUnverified, and the rule
	// in store/companies.go), the company and its owner are removed and the
	// address is free for another sign-up.
	abandonedSignupKeep = account.DefaultVerifyTTL + 7*24*time.Hour
)

// pruneSignupBatch bounds the companies one transaction of the prune of
// abandoned sign-ups looks at, so that each stays short.
const pruneSignupBatch = 200

// pruneMediaBatch bounds the uploads one transaction of the prune deletes,
// so that each stays short.
const pruneMediaBatch = 1000

// pruneMedia deletes the uploads no message took that were made before
// cutoff, batch by batch until none is left: one batch an hour falls
// behind agents that leave more uploads unnamed than that, and what it
// leaves waits ever longer.
func pruneMedia(st backend, cutoff time.Time, batch int) (int, error) {
	total := 0
	for {
		n, err := st.PruneMedia(cutoff, batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}

// pruneAbandonedSignups removes the abandoned sign-ups created before
// cutoff (store.Backend.PruneAbandonedSignups), looking at the companies in
// id order, batch by batch, each batch one transaction, until it has looked
// at every one.
func pruneAbandonedSignups(st backend, cutoff, now time.Time, batch int) (int, error) {
	total := 0
	var after uint64
	for {
		n, last, err := st.PruneAbandonedSignups(cutoff, now, after, batch)
		total += n
		if err != nil || last == 0 {
			return total, err
		}
		after = last
	}
}

// pruneStore drops expired pairing codes, token families without tokens,
// old mail, old storage counters, media uploads no message took, sticky pool
// entries older than store.StickyAge, the ids of old payment-provider
// events and abandoned sign-ups, logging what it dropped.
func pruneStore(st backend, now time.Time, log *slog.Logger) {
	count := func(what string, n int, err error) {
		if err != nil {
			log.Error("prune "+what, "err", err)
		} else if n > 0 {
			log.Debug("pruned "+what, "count", n)
		}
	}
	n, err := st.PrunePairings(now.Add(-pairingKeep))
	count("expired pairing codes", n, err)
	n, err = st.PruneTokenFamilies()
	count("refresh-token families without tokens", n, err)
	done, unsent, err := st.PruneMail(now.Add(-mailKeepDone), now.Add(-mailKeepUnsent))
	count("sent mail", done, err)
	for _, m := range unsent {
		log.Warn("dropped an e-mail that was never sent", "mail_id", m.ID, "to", m.To, "subject", m.Subject,
			"state", m.State, "created_at", m.CreatedAt, "attempts", m.Attempts, "last_error", m.LastError)
	}
	n, err = st.PruneStorageCounters(now.Add(-storageCountersKeep))
	count("daily storage counters", n, err)
	n, err = pruneMedia(st, now.Add(-store.DefaultMediaOrphanAge), pruneMediaBatch)
	count("media uploads no message named", n, err)
	n, err = st.PruneSticky(now.Add(-store.StickyAge))
	count("sticky pool entries", n, err)
	n, err = st.PruneBillingEvents(now.Add(-billingEventsKeep))
	count("applied payment-provider event ids", n, err)
	n, err = pruneAbandonedSignups(st, now.Add(-abandonedSignupKeep), now, pruneSignupBatch)
	if err != nil {
		log.Error("prune abandoned sign-ups", "err", err)
	} else if n > 0 {
		log.Info("removed abandoned sign-ups: companies whose owner never verified the address", "count", n)
	}
}

// pruneLeaderKey is the advisory lock key whose holder prunes the store on
// a cluster ("simr" in ASCII: a key no other lock of the schema uses).
const pruneLeaderKey int64 = 0x73696d72

// pruner returns the store's pruning loop (pruneLoop) as this node runs it:
// on one node at once; on a cluster under the leadership of pruneLeaderKey,
// so that one node prunes at a time. Every prune is a conditional delete
// that is harmless twice, so the moment two nodes may overlap when a
// leader's connection is lost costs nothing; the leader keeps the cluster
// from each node scanning the same tables every minute.
func pruner(node *clusterNode, where storeConfig, st backend, accounts *account.Service, log *slog.Logger) (func(ctx context.Context), error) {
	loop := func(ctx context.Context) { pruneLoop(ctx, st, accounts, log) }
	if node.bus == nil || !where.postgres() {
		return loop, nil
	}
	leader, err := cluster.NewLeader(cluster.LeaderConfig{URL: where.databaseURL.URL(), Key: pruneLeaderKey, Logger: log.With("component", "prune")})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { leader.Run(ctx, loop) }, nil
}

// pruneLoop deletes long-expired tokens and console sessions every
// sweepEvery and hourly prunes the rest of the store (pruneStore), until ctx
// ends.
func pruneLoop(ctx context.Context, st backend, accounts *account.Service, log *slog.Logger) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	var lastPrune time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if now.Sub(lastPrune) >= pruneStoreEvery {
				pruneStore(st, now, log)
				lastPrune = now
			}
			if n, err := st.PruneTokens(now.Add(-24 * time.Hour)); err != nil {
				log.Error("prune expired tokens", "err", err)
			} else if n > 0 {
				log.Debug("pruned expired tokens", "count", n)
			}
			if n, err := accounts.PruneConsoleSessions(); err != nil {
				log.Error("prune console sessions", "err", err)
			} else if n > 0 {
				log.Debug("pruned console sessions", "count", n)
			}
		}
	}
}
