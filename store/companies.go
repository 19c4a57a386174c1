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
	// ClosingAt is when the company's removal was accepted
	// (MarkCompanyClosing): from then on its subscription takes no write
	// (a checkout can no longer be opened for it), and the removal's steps
	// (RemoveCompanyStep) run until its record goes, resumed by whoever
	// finds the mark (ClosingCompanies) after a stop. Zero for a company
	// that is not being removed.
	ClosingAt time.Time `json:"closing_at,omitzero"`
}

// RemovalVet decides, in the transaction that marks a company closing
// (MarkCompanyClosing), whether it may be removed, from its record and
// its subscription (found false: none stored): an error refuses it, and
// nothing is written. It must not call the store.
type RemovalVet func(c Company, sub Subscription, found bool) error

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

// CompanyRemoval is what one step of a company's removal
// (RemoveCompanyStep, in both stores) removed: the company's messages,
// users (pending invitations included) and devices (live ones; a deleted
// registration is a record of its own), its other records of every kind
// (Records: indexes and counters, webhook deliveries and attempts, media,
// opt-outs, pools, numbers, activity, day totals, billing records, mail,
// sessions and tokens), and whether the company's own record went with
// this step (Done), the last.
//
// A removal runs in steps of a bounded number of records, each its own
// transaction, so a company of many messages never holds the embedded
// store's single writer for long: the first step takes what lets anyone
// act for the company (its API key, users with their sessions, refresh
// and one-time tokens, devices with their tokens, pairing codes), the
// next ones its pending webhook deliveries and media (what leaves the
// server without a credential), its messages and the rest, and the company's
// own record goes last, so a removal stopped midway leaves the company,
// without its credentials, for the next run to finish. The ids stay taken
// (neither store gives an id twice). What is not the company's stays: the
// account mails sent to its users' addresses (Mail.CompanyID 0), which go
// with the outbox's own prune (PruneMail), and the payment provider's
// event ids already applied (PruneBillingEvents), which name no company.
type CompanyRemoval struct {
	Messages int64 `json:"messages"`
	Users    int64 `json:"users"`
	Devices  int64 `json:"devices"`
	Records  int64 `json:"records"`
	Done     bool  `json:"-"`
}

// Add adds the counts of o to r, and takes its Done.
func (r *CompanyRemoval) Add(o CompanyRemoval) {
	r.Messages += o.Messages
	r.Users += o.Users
	r.Devices += o.Devices
	r.Records += o.Records
	r.Done = o.Done
}

// RemovalBlock is what keeps a company from being removed now (its
// subscription's state, RemovalBlocked), the same for the operator's
// command (simrelay admin delete-company) and the owner's closing of the
// company (DELETE /company).
type RemovalBlock int

const (
	// RemovalFree: nothing keeps the company.
	RemovalFree RemovalBlock = iota
	// RemovalSubscription: a payment provider's subscription not ended
	// (SubscriptionLive), which the provider would go on billing.
	RemovalSubscription
	// RemovalCheckoutPayable: a provider checkout that can still be paid
	// (CheckoutPayable), which would make such a subscription.
	RemovalCheckoutPayable
	// RemovalCheckoutOpening: a checkout being opened (CheckoutClaimHeld),
	// which could be paid once opened.
	RemovalCheckoutOpening
)

// RemovalBlocked says what in the company's subscription (found false:
// none stored) keeps it from being removed at now, the first of a live
// subscription, a payable checkout and a checkout being opened.
func RemovalBlocked(sub Subscription, found bool, now time.Time) RemovalBlock {
	switch {
	case !found:
		return RemovalFree
	case SubscriptionLive(sub):
		return RemovalSubscription
	case CheckoutPayable(sub.Checkout, now):
		return RemovalCheckoutPayable
	case CheckoutClaimHeld(sub.Checkout, now):
		return RemovalCheckoutOpening
	}
	return RemovalFree
}

// SubscriptionLive says whether sub is a payment provider's subscription
// that has not ended (any status but canceled): a company that holds one
// is not removed (simrelay admin delete-company), since the provider
// would go on billing a customer whose company is gone. A plan set
// without the provider (admin set-plan, the default plan) is none.
func SubscriptionLive(sub Subscription) bool {
	return sub.ProviderSubID != "" && sub.Status != "canceled"
}
