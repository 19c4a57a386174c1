package store

import (
	"errors"
	"strings"
	"time"
)

// Roles of a user within a company.
const (
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// MaxUsers is how many users one company may have, invitations not yet
// accepted included. Each is a record the company's user list, the console's
// team page and the company export carry whole, so the count is bounded
// rather than left to the daily storage budget alone, which would let a
// company grow it by thousands a day without end.
const MaxUsers = 1000

// ErrTooManyUsers is returned when an invitation would give a company more
// than MaxUsers users.
var ErrTooManyUsers = errors.New("store: too many users")

// EmailKey is a user's address as every store finds it, and as the failed
// logins are counted: surrounding blanks and case do not make another
// address.
func EmailKey(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// User is a person who signs in to a company.
type User struct {
	ID        uint64 `json:"id"`
	CompanyID uint64 `json:"company_id"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Email     string `json:"email"`
	Phone     string `json:"phone,omitempty"`
	Role      string `json:"role"`
	// PasswordHash is an argon2id PHC string; empty until an invited user sets one.
	PasswordHash  string    `json:"password_hash,omitempty"`
	EmailVerified bool      `json:"email_verified"`
	CreatedAt     time.Time `json:"created_at"`
	// TokenGeneration moves on when a password is set through an e-mailed
	// link. Access tokens carry the generation they were issued under and
	// are refused once it moved: a reset signs out the tokens an attacker
	// may hold, not only the refresh tokens (account.Authenticate).
	TokenGeneration uint64 `json:"token_generation,omitempty"`
	// InvitedBy is the id of the user whose invitation made this one, kept
	// for good: removing that user leaves it, and ids are never given
	// again, so it names the same person ever after, whom the company can
	// tell from its users by the id no longer among them. Zero when the
	// user was not invited by a user: a signed-up owner, the first admin of
	// `admin create-company`, an invitation made with the API key (which
	// acts for the company, not for a person), and users stored before the
	// field was.
	InvitedBy uint64 `json:"invited_by,omitempty"`
}

// ConsoleSession is one signed-in browser.
type ConsoleSession struct {
	UserID    uint64 `json:"user_id"`
	CompanyID uint64 `json:"company_id"`
	// CSRF is the token every change this session makes must carry. It is
	// no credential by itself: without the cookie it opens nothing.
	CSRF      string    `json:"csrf"`
	CreatedAt time.Time `json:"created_at"`
	SeenAt    time.Time `json:"seen_at"`
	// ExpiresAt is the absolute end, whatever the activity.
	ExpiresAt time.Time `json:"expires_at"`
	// Generation is the user's TokenGeneration when the sign-in checked the
	// password: a sign-in that raced a reset stored its session after the
	// reset's revocation, and is refused by this.
	Generation uint64 `json:"generation,omitempty"`
}
