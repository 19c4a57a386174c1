package problem

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Code is a stable, documented lower_snake_case error code.
type Code string

// The catalog. docs/errors.md documents every code; a test keeps the two in step.
const (
	ValidationFailed  Code = "validation_failed"   // an input field is missing or invalid
	InvalidJSON       Code = "invalid_json"        // the body is not valid JSON
	PayloadTooLarge   Code = "payload_too_large"   // the body is over the size limit
	InvalidToken      Code = "invalid_token"       // a verification or reset token is used, expired or unknown
	Unauthorized      Code = "unauthorized"        // no valid credential
	InvalidLogin      Code = "invalid_credentials" // wrong e-mail or password
	EmailNotVerified  Code = "email_not_verified"  // login before the e-mail address was verified
	Forbidden         Code = "forbidden"           // the role may not do this
	UserTokenRequired Code = "user_token_required" // the route needs a user's access token, not the API key
	SIMMismatch       Code = "sim_mismatch"        // the SIM slot is not the device's selected SIM
	DeviceDisabled    Code = "device_disabled"     // the device is disabled
	NotFound          Code = "not_found"           // no such resource (or another company's)
	MethodNotAllowed  Code = "method_not_allowed"  // the route exists, the method does not
	Conflict          Code = "conflict"            // the change conflicts with the current state
	RateLimited       Code = "rate_limited"        // over an API rate limit
	// StorageBudgetExceeded: the company has stored its daily storage budget.
	StorageBudgetExceeded Code = "storage_budget_exceeded"
	// PlanLimitReached: the company's plan allows no more messages this period (429) or devices (403).
	PlanLimitReached Code = "plan_limit_reached"
	// RecipientOptedOut: the recipient is on the company's opt-out list (it answered STOP, or was added).
	RecipientOptedOut Code = "recipient_opted_out"
	// BillingDisabled: the server bills nothing (self-hosted mode), so there is no billing portal.
	BillingDisabled Code = "billing_disabled"
	// PaymentProviderError: the payment provider failed or refused the call; the cause is logged.
	PaymentProviderError Code = "payment_provider_error"
	// NumberCapped: the WhatsApp number or iMessage handle is at one of its rolling caps (429, Retry-After).
	NumberCapped Code = "number_capped"
	// NumberPaused: the WhatsApp number or iMessage handle is paused (403).
	NumberPaused Code = "number_paused"
	// IdempotencyKeyReused: the Idempotency-Key answered another request to the route within 24 h (422).
	IdempotencyKeyReused Code = "idempotency_key_reused"
	// PoolUnavailable: no member of the sender pool can take the send now (409).
	PoolUnavailable Code = "pool_unavailable"
	// SIMCapped: the SIM is at one of its caps (per day, per month, recipients per day) (429).
	SIMCapped Code = "sim_capped"
	// PoolCapped: every member of the pool that could send is at a cap of its SIM (429).
	PoolCapped Code = "pool_capped"
	// SignupClosed: the server's operator closed public sign-up (serve --signup closed) (403).
	SignupClosed Code = "signup_closed"
	// BackupExternal: the store is in PostgreSQL, backed up with pg_dump, not GET /admin/backup (409).
	BackupExternal Code = "backup_external"
	// RangeNotSatisfiable: a file's Range starts at or past its end (416).
	RangeNotSatisfiable Code = "range_not_satisfiable"
	// RequestTimeout: a request's body stopped arriving (408): send it again.
	RequestTimeout Code = "request_timeout"
	Unavailable    Code = "unavailable" // the server is shutting down or not ready
	Internal       Code = "internal"    // a server fault; the cause is logged, not sent
)

var statuses = map[Code]int{
	ValidationFailed:      http.StatusBadRequest,
	InvalidJSON:           http.StatusBadRequest,
	PayloadTooLarge:       http.StatusRequestEntityTooLarge,
	InvalidToken:          http.StatusBadRequest,
	Unauthorized:          http.StatusUnauthorized,
	InvalidLogin:          http.StatusUnauthorized,
	EmailNotVerified:      http.StatusForbidden,
	Forbidden:             http.StatusForbidden,
	UserTokenRequired:     http.StatusForbidden,
	SIMMismatch:           http.StatusForbidden,
	DeviceDisabled:        http.StatusForbidden,
	RecipientOptedOut:     http.StatusForbidden,
	NotFound:              http.StatusNotFound,
	MethodNotAllowed:      http.StatusMethodNotAllowed,
	Conflict:              http.StatusConflict,
	RateLimited:           http.StatusTooManyRequests,
	StorageBudgetExceeded: http.StatusTooManyRequests,
	PlanLimitReached:      http.StatusTooManyRequests,
	BillingDisabled:       http.StatusConflict,
	PaymentProviderError:  http.StatusBadGateway,
	NumberCapped:          http.StatusTooManyRequests,
	NumberPaused:          http.StatusForbidden,
	SignupClosed:          http.StatusForbidden,
	IdempotencyKeyReused:  http.StatusUnprocessableEntity,
	PoolUnavailable:       http.StatusConflict,
	SIMCapped:             http.StatusTooManyRequests,
	PoolCapped:            http.StatusTooManyRequests,
	BackupExternal:        http.StatusConflict,
	RangeNotSatisfiable:   http.StatusRequestedRangeNotSatisfiable,
	RequestTimeout:        http.StatusRequestTimeout,
	Unavailable:           http.StatusServiceUnavailable,
	Internal:              http.StatusInternalServerError,
}

// Codes lists every code of the catalog.
func Codes() []Code {
	out := make([]Code, 0, len(statuses))
	for c := range statuses {
		out = append(out, c)
	}
	return out
}

// Status is the HTTP status the code answers with; 500 for a code outside the catalog.
func (c Code) Status() int {
	if s, ok := statuses[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is a failure a client can act on.
type Error struct {
	Code    Code   `json:"error"`
	Message string `json:"message"`
	// Field is the JSON path (or query parameter name) of the input at fault.
	Field string `json:"field,omitempty"`
	// RetryAfter, when set, is sent as the Retry-After header in whole seconds.
	RetryAfter int `json:"-"`
	// HTTPStatus, when set, replaces the code's usual status: plan_limit_reached
	// is 429 on a send and 403 on registering a device.
	HTTPStatus int `json:"-"`
	// predicate is what Invalid was told is wrong with Field ("must be 1 to
	// 100"), for Refield; "" when Message was given whole.
	predicate string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Status is the HTTP status of the error's code.
func (e *Error) Status() int {
	if e.HTTPStatus != 0 {
		return e.HTTPStatus
	}
	return e.Code.Status()
}

// New returns an error with the given code and one human sentence.
func New(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// Newf is New with a format.
func Newf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid reports one invalid input field. msg is either what is wrong
// with the field, a predicate that reads after its name ("must be from 1 to
// 100", "is required"), or a whole sentence of its own (it starts with a
// capital letter). A predicate becomes the sentence the contract asks for
// in message (section 1), the field's name first: "limit must be from 1 to
// 100.". A sentence is kept as it is.
func Invalid(field, msg string) *Error {
	if !predicate(msg) {
		return &Error{Code: ValidationFailed, Message: msg, Field: field}
	}
	return &Error{Code: ValidationFailed, Message: sentence(field, msg), Field: field, predicate: msg}
}

// OutOfRange is the refusal of an integer input that takes least to most:
// "limit must be from 1 to 100.". It is the one sentence of every value such
// an input does not take, out of the range or no whole number at all (0,
// 1e20, abc in a query string), so that a client is told the range whatever
// it sent.
func OutOfRange(field string, least, most int) *Error {
	return Invalid(field, fmt.Sprintf("must be from %d to %d", least, most))
}

// Refield is e about another field: an error of Invalid names the field in
// its message, so the message is made again with the new name (a form that
// shows one item's fields by their own names, where the API names them
// with the item's path). A message given whole is kept.
func (e *Error) Refield(field string) *Error {
	out := *e
	out.Field = field
	if e.predicate != "" {
		out.Message = sentence(field, e.predicate)
	}
	return &out
}

// Named is e with its message naming the field as name rather than by its
// path: a form for people says "Password must be at least 8 characters."
// where the API says "owner.password must be at least 8 characters.". Field
// stays; a message given whole is kept.
func (e *Error) Named(name string) *Error {
	out := *e
	if e.predicate != "" {
		out.Message = sentence(name, e.predicate)
	}
	return &out
}

// predicate says whether msg is a predicate for a field's name rather than
// a sentence: it starts with a lower-case letter.
func predicate(msg string) bool {
	r, _ := utf8.DecodeRuneInString(msg)
	return unicode.IsLower(r)
}

// sentence is the field's name, the predicate and a full stop: one sentence.
// A predicate that names the field already is not given it twice. A field
// without a name (a query parameter whose name was NULs alone) is "The
// input", so that the predicate still has a subject.
func sentence(field, pred string) string {
	if field == "" {
		field = "The input"
	}
	s := pred
	if !strings.HasPrefix(pred, field+" ") {
		s = field + " " + pred
	}
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var pe *Error
	if errors.As(err, &pe) {
		return pe, true
	}
	return nil, false
}

// Is reports whether err carries the given code.
func Is(err error, code Code) bool {
	pe, ok := As(err)
	return ok && pe.Code == code
}

// Count is n with its noun, plural but for 1, as a message says an amount:
// "1 device", "3 devices", "1 second", "0 seconds". The nouns of the
// messages make their plural with an s.
func Count[N ~int | ~int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// InWords says d the way a person reads it in a message, in its two
// largest units: "45 seconds", "15 minutes", "3 minutes 20 seconds",
// "1 hour", "1 hour 5 minutes". What is below the second unit rounds the
// second unit up, so that a wait read in words is never shorter than d (a
// client that retries after it is never early): 1h0m30s says "1 hour 1
// minute", 3m20.5s "3 minutes 21 seconds", 59m59.5s "1 hour". Whole days
// from two on are days ("7 days"; 24 hours stay "24 hours", 49 hours "49
// hours"). d under a second says "1 second". A wait before a retry (its
// Retry-After in words), a rate's window, a mailed link's lifetime and a
// webhook entry's time to be disabled alike.
func InWords(d time.Duration) string {
	d = max(roundUp(d, time.Second), time.Second)
	if d > time.Hour {
		d = roundUp(d, time.Minute)
	}
	const day = 24 * time.Hour
	if d >= 2*day && d%day == 0 {
		return Count(int64(d/day), "day")
	}
	h, m, s := int64(d/time.Hour), int64(d%time.Hour/time.Minute), int64(d%time.Minute/time.Second)
	switch {
	case h > 0 && m > 0:
		return Count(h, "hour") + " " + Count(m, "minute")
	case h > 0:
		return Count(h, "hour")
	case m > 0 && s > 0:
		return Count(m, "minute") + " " + Count(s, "second")
	case m > 0:
		return Count(m, "minute")
	}
	return Count(s, "second")
}

// roundUp is d rounded up to a multiple of unit (d itself when it is one);
// a d too long for that, in the last unit before the largest Duration,
// rounds down instead.
func roundUp(d, unit time.Duration) time.Duration {
	r := d % unit
	if r <= 0 {
		return d
	}
	if d > math.MaxInt64-unit {
		return d - r
	}
	return d + unit - r
}

// RetrySeconds is a wait as a Retry-After value: whole seconds, rounded up
// (a client that waits it is never early), at least 1.
func RetrySeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}
