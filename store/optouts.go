package store

import (
	"errors"
	"time"

	"github.com/simrelay/simrelay/internal/visible"
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

// The keywords, as carriers and the peer gateways read them: the whole text,
// trimmed, in any case.
var (
	stopKeywords  = []string{"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT"}
	startKeywords = []string{"START", "UNSTOP"}
)

// KeywordOf reads an inbound SMS's text as a stop or start keyword: the
// whole text, trimmed of white space and of invisible characters (a
// zero-width space, a byte order mark, a word joiner, a direction mark: what
// a keyboard or a paste puts around a word unseen, and what the person who
// typed STOP cannot know is there), in any case of its ASCII letters.
// Only ASCII letters are folded: strings.ToUpper (and EqualFold) also take
// the long s "ſ" for S and the dotless "ı" for I, so "ſtop" and "quıt"
// stopped a number and "ſtart" started one again, words no carrier reads as
// keywords.
func KeywordOf(text string) (stop, start bool) {
	word := visible.Trim(text)
	return asciiOneOf(word, stopKeywords), asciiOneOf(word, startKeywords)
}

// asciiOneOf reports whether word is one of the upper-case ASCII words, its
// ASCII letters in any case.
func asciiOneOf(word string, words []string) bool {
	for _, w := range words {
		if len(word) == len(w) && asciiEqualFold(word, w) {
			return true
		}
	}
	return false
}

func asciiEqualFold(a, upper string) bool {
	for i := 0; i < len(a); i++ {
		c := a[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != upper[i] {
			return false
		}
	}
	return true
}
