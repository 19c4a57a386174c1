package store

import (
	"errors"
	"time"
)

// Opt-out sources.
const (
	OptOutKeyword = "keyword" // the recipient sent a stop keyword
	OptOutAPI     = "api"     // the company added it
)

// OptOut is one number on a company's list.
type OptOut struct {
	Phone     string    `json:"phone"`
	Source    string    `json:"source"`
	CreatedAt time.Time `json:"created_at"`
}

// ErrOptedOut is wrapped by an *OptOutError.
var ErrOptedOut = errors.New("store: the recipient opted out")

// OptOutError names the refused recipient; Index is its place in a bulk
// send, -1 for a single one.
type OptOutError struct {
	Phone string
	Index int
}

func (e *OptOutError) Error() string { return "store: " + e.Phone + " opted out" }

func (e *OptOutError) Unwrap() error { return ErrOptedOut }
