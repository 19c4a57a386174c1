package main

import (
	"time"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/httpapi"
	"github.com/simrelay/simrelay/mail"
	"github.com/simrelay/simrelay/media"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/boltstore"
	"github.com/simrelay/simrelay/web"
	"github.com/simrelay/simrelay/webhook"
)

// backend is what the server asks of its store: every domain's interface,
// and the wiring's own needs. Both store backends answer it.
type backend interface {
	account.Store
	billing.Store
	channel.Store
	device.Store
	mail.Outbox
	media.Store
	sms.Store
	webhook.Store
	httpapi.Backuper
	httpapi.Analytics
	web.Analytics
	pruner

	Secret(name string, size int) ([]byte, error)
	SetPlans(p store.Plans)
	SetStatusEvents(h store.StatusEvents)
	Close() error
}

var _ backend = (*boltstore.Store)(nil)

// pruner is the store's hourly housekeeping (pruneStore) and the sweep's
// token pruning.
type pruner interface {
	PruneMail(doneCutoff, unsentCutoff time.Time) (done int, unsent []store.Mail, err error)
	PruneMedia(cutoff time.Time, limit int) (int, error)
	PrunePairings(cutoff time.Time) (int, error)
	PruneSticky(cutoff time.Time) (int, error)
	PruneStorageCounters(cutoff time.Time) (int, error)
	PruneTokenFamilies() (int, error)
	PruneTokens(cutoff time.Time) (int, error)
}
