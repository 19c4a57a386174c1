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
