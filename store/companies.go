package store

import (
	"errors"
	"time"
)

// ErrEmailDeviceGone is returned by UpdateCompany when the update sets the
// company's e-mail device to a fingerprint that names no live device of
// the company (never paired, deleted, or another company's). The check
// and the write are one transaction, so a device deleted meanwhile is
// either refused here or cleared by its deletion (DeleteDevice).
var ErrEmailDeviceGone = errors.New("store: the e-mail device names no device of the company")

// Company is a tenant. Everything else a company owns hangs off its ID.
type Company struct {
	ID        uint64    `json:"id"`
	Name      string    `json:"name"`
	Phone     string    `json:"phone"`
	Address   string    `json:"address,omitempty"`
	City      string    `json:"city,omitempty"`
	State     string    `json:"state,omitempty"`
	Country   string    `json:"country,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// APIKeyHash is sha256 of the current key; the api_keys index maps it back here.
	APIKeyHash []byte `json:"api_key_hash"`
	// APIKeySealed is the current key encrypted with the server's key, so it can be shown again.
	APIKeySealed    []byte    `json:"api_key_sealed"`
	APIKeyCreatedAt time.Time `json:"api_key_created_at"`
	// OptOutKeywords switches the STOP/START keywords of inbound SMS
	// (optouts.go); nil, as for every company that never set it, is on.
	OptOutKeywords *bool `json:"opt_out_keywords,omitempty"`
	// EmailDevice is the fingerprint of the device that e-mail to SMS sends
	// through when the address names none; "" for the company's only device.
	EmailDevice string `json:"email_device,omitempty"`
	// Region is the country (ISO 3166 alpha-2, upper case) in which the
	// company's numbers written without their country code are read
	// (numplan.Normalize); "", as for every company that never set it,
	// keeps the international form required.
	Region string `json:"region,omitempty"`
}

// An abandoned sign-up is a company that a sign-up made and nobody ever
// used (PruneAbandonedSignups, in both stores, removes it with its
// records): created before the prune's cutoff, its API key the one made
// with it (never rotated), its only user the owner the sign-up made
// (SignupOwnerUnverified) with no one-time token still to be followed (a
// password reset verifies the address), no refresh token and no console
// session, and no other record under the company: no device, pairing,
// message, webhook entry, plan, invitation, counter or activity line. An
// owner who never verified the address cannot log in and never saw the
// API key, so such a company cannot have made any of them; the check
// holds the rule whatever made them. The check and the removal are one
// transaction: a verification that commits first keeps the company.
// Removing it frees the owner's address for another sign-up; the ids stay
// taken (neither store gives an id twice). The account mails sent to the
// address are not the company's (Mail.CompanyID 0) and go with the mail
// outbox's own prune (PruneMail).

// SignupOwnerUnverified says whether u is the owner a sign-up made who
// has not verified the address: an admin who set a password at sign-up,
// invited by nobody, with the address unverified. An admin made by
// `admin create-company` is verified from the start, and an invited user
// has an inviter or no password of a sign-up.
func SignupOwnerUnverified(u User) bool {
	return u.Role == RoleAdmin && !u.EmailVerified && u.InvitedBy == 0 && u.PasswordHash != ""
}
