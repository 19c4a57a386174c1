package sms

import (
	"time"

	"github.com/simrelay/simrelay/store"
)

// Store is what this package asks of the store; both backends answer it.
type Store interface {
	AddOptOut(companyID uint64, phone string, now time.Time) (o store.OptOut, created bool, err error)
	AllPools() ([]store.Pool, error)
	Cancel(companyID uint64, uuid string, now time.Time) (store.Message, error)
	CarrierFailing(companyID uint64, now time.Time) (map[uint64][]string, error)
	Company(id uint64) (store.Company, error)
	Conversations(companyID uint64, device string, limit int) ([]store.Conversation, error)
	DeletePool(companyID, id uint64) (store.Pool, error)
	DeviceCompany(companyID, deviceID uint64) (store.Company, error)
	Enqueue(m *store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func(store.Message) (int, []byte)) (store.Message, *store.Idempotent, error)
	EnqueueBulk(ms []store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func([]store.Message) (int, []byte)) ([]store.Message, *store.Idempotent, error)
	ExpireQueued(now time.Time, limit int) ([]store.Message, error)
	Failover(in store.FailoverInput, check store.DeviceCheck, now time.Time) (moved []store.Message, next uint64, err error)
	History(companyID uint64, device, phone string, page, limit int) ([]store.Message, int, error)
	InboundList(q store.InboundQuery) ([]store.Message, error)
	MessageByUUID(companyID uint64, uuid string) (store.Message, error)
	MessageSequence() (uint64, error)
	NextDue() (at time.Time, ok bool, err error)
	OptOuts(companyID uint64, after string, limit int) ([]store.OptOut, error)
	OptedOut(companyID uint64, phone string) (bool, error)
	Pending(companyID, deviceID uint64, after uint64, limit int, now time.Time, moved func([]store.Message)) ([]store.Message, error)
	Pool(companyID, id uint64) (store.Pool, error)
	Pools(companyID uint64) ([]store.Pool, error)
	PruneIdempotency(cutoff time.Time) (int, error)
	PruneSIMCounts(now time.Time) (int, error)
	PutPool(companyID, id uint64, now time.Time, edit func(cur store.Pool) (store.PoolInput, error)) (store.Pool, error)
	ReleaseDue(now time.Time, limit int) ([]store.Message, error)
	RemoveOptOut(companyID uint64, phone string) error
	SIMUsages(companyID uint64, fingerprint string, now time.Time) ([]store.SIMUsage, error)
	SetSIMCaps(companyID uint64, fingerprint string, caps map[string]store.SIMCaps, now time.Time) ([]store.SIMUsage, error)
	StoreInbound(m *store.Message, now func() time.Time) (store.Message, bool, error)
	TransitionLater(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) store.Transit
}
