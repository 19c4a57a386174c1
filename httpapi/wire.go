package httpapi

import (
	"time"

	"github.com/simrelay/simrelay/store"
)

// timeLayout is the contract's timestamp: RFC 3339, UTC, milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z"

func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

type userJSON struct {
	ID            uint64 `json:"id"`
	FirstName     string `json:"firstName"`
	LastName      string `json:"lastName"`
	Email         string `json:"email"`
	Phone         string `json:"phone"`
	Role          string `json:"role"`
	EmailVerified bool   `json:"emailVerified"`
	CreatedAt     string `json:"createdAt"`
	// InvitedBy is the id of the user who invited this one, which stays
	// when that user is removed; null when no user did (docs/api.md,
	// Users).
	InvitedBy *uint64 `json:"invitedBy"`
}

func userOut(u store.User) userJSON {
	out := userJSON{ID: u.ID, FirstName: u.FirstName, LastName: u.LastName, Email: u.Email, Phone: u.Phone,
		Role: u.Role, EmailVerified: u.EmailVerified, CreatedAt: ts(u.CreatedAt)}
	if u.InvitedBy != 0 {
		by := u.InvitedBy
		out.InvitedBy = &by
	}
	return out
}

type companyJSON struct {
	ID        uint64 `json:"id"`
	Name      string `json:"name"`
	Phone     string `json:"phone"`
	Address   string `json:"address"`
	City      string `json:"city"`
	State     string `json:"state"`
	Country   string `json:"country"`
	CreatedAt string `json:"createdAt"`
	// OptOutKeywords says whether STOP/START in inbound SMS change the
	// opt-out list; shown once the company has set it (unset is on), so a
	// company that never does sees the specification's object.
	OptOutKeywords *bool `json:"optOutKeywords,omitempty"`
	// EmailDevice is the device of e-mail to SMS (docs/email.md), shown
	// once set, for the same reason.
	EmailDevice string `json:"emailDevice,omitempty"`
	// Region is the country of numbers written without their country code
	// (docs/api.md), shown once set.
	Region string `json:"region,omitempty"`
}

func companyOut(c store.Company) companyJSON {
	return companyJSON{ID: c.ID, Name: c.Name, Phone: c.Phone, Address: c.Address, City: c.City,
		State: c.State, Country: c.Country, CreatedAt: ts(c.CreatedAt), OptOutKeywords: c.OptOutKeywords, EmailDevice: c.EmailDevice, Region: c.Region}
}

type messageJSON struct {
	Message string `json:"message"`
}
