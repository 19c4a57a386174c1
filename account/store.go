package account

import (
	"time"

	"github.com/simrelay/simrelay/store"
)

// Store is what this package asks of the store; both backends answer it.
type Store interface {
	Company(id uint64) (store.Company, error)
	CompanyByAPIKeyHash(hash []byte) (store.Company, error)
	CompanyUsers(companyID uint64) ([]store.User, error)
	CompanyDevices(companyID uint64) ([]store.Device, error)
	ClosingCompanies() ([]uint64, error)
	ConsoleSession(hash []byte) (store.ConsoleSession, error)
	ConsumeOneTimeToken(hash []byte, kinds []string, now time.Time, revokeSessions bool, fn func(*store.User) error) (store.User, error)
	CreateCompany(c *store.Company, admin *store.User) error
	DeleteConsoleSession(hash []byte) error
	DeleteUser(id uint64) error
	InviteUser(u *store.User, now time.Time) (heldElsewhere bool, err error)
	MarkCompanyClosing(companyID uint64, now time.Time, vet store.RemovalVet) (store.Company, error)
	PruneConsoleSessions(idleCutoff, now time.Time) (int, error)
	PutConsoleSession(hash []byte, sess store.ConsoleSession) error
	PutOneTimeToken(hash []byte, t store.OneTimeToken) error
	RemoveCompanyStep(companyID uint64, limit int) (store.CompanyRemoval, error)
	RotateRefreshToken(oldHash, newHash []byte, newExpiry, now time.Time) (store.RefreshToken, error)
	Secret(name string, size int) ([]byte, error)
	StartRefreshFamily(hash []byte, t store.RefreshToken, now time.Time) error
	TouchConsoleSession(hash []byte, at time.Time) error
	UpdateCompany(id uint64, fn func(*store.Company) error) (store.Company, error)
	UpdateUser(id uint64, fn func(*store.User) error) (store.User, error)
	User(id uint64) (store.User, error)
	UserByEmail(email string) (store.User, error)
}
