package channel

import (
	"time"

	"github.com/simrelay/simrelay/store"
)

// Store is what this package asks of the store; both backends answer it.
type Store interface {
	AgentHandOut(companyID, deviceID, messageID uint64) (bool, error)
	AgentMessages(companyID, numberID uint64, page, limit int) ([]store.Message, int, error)
	AgentNumber(companyID uint64, channel, publicID string) (store.AgentNumber, error)
	AgentNumberByRef(companyID, numberID uint64) (store.AgentNumber, error)
	AgentNumbers(companyID uint64, channel string) ([]store.AgentNumber, error)
	AgentNumbersSentSince(companyID uint64, channel string, since time.Time) ([]store.AgentNumber, []int, error)
	AgentNumbersNew(companyID uint64, channel string, addresses []string) (fresh, have int, err error)
	AgentPending(companyID, deviceID, numberID, after uint64, limit int) ([]store.Message, error)
	AgentRelease(companyID, deviceID uint64, held []string) ([]store.AgentNumber, error)
	AgentSendsSince(companyID, numberID uint64, since time.Time) (int, error)
	AnnounceAgentNumbers(companyID, deviceID uint64, sets []store.Announced, now time.Time, limit int) ([]store.AgentNumber, error)
	Company(id uint64) (store.Company, error)
	DeviceCompany(companyID, deviceID uint64) (store.Company, error)
	GoneCompanies(ids []uint64) ([]uint64, error)
	EnqueueAgent(m *store.Message, idemKey store.IdempotencyKey, now func() time.Time, vet store.SendVet, answer func(store.Message) (int, []byte)) (store.Message, *store.Idempotent, error)
	MessageByUUID(companyID uint64, uuid string) (store.Message, error)
	PruneAgentSends(cutoff time.Time) (int, error)
	StoreAgentInbound(m *store.Message, now func() time.Time) (store.Message, bool, error)
	UpdateAgentNumber(companyID uint64, channel, publicID string, now time.Time, fn func(*store.AgentNumber) error) (store.AgentNumber, error)
}
