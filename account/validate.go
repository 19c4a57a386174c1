package account

import (
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/simrelay/simrelay/internal/linebreak"
	"github.com/simrelay/simrelay/internal/visible"
	"github.com/simrelay/simrelay/phone/numplan"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Input limits. The spec sets the password minimum; the maximums keep records
// small and argon2 inputs bounded.
const (
	minPasswordLen = 8
	maxPasswordLen = 1024
	maxNameLen     = 100
	maxTextLen     = 200
	maxEmailLen    = 254
)

func required(field, v string, max int) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", problem.Invalid(field, "is required")
	}
	return optional(field, v, max)
}

// optional also refuses a line break or another control character: every
// text field here (names, a company's address, city and state) is one line
// in a log line, an e-mail's subject or an activity line (linebreak). It is
// asked after the trim, so a stray newline at the end of a pasted name is
// forgiven, as the spaces around it are.
func optional(field, v string, max int) (string, error) {
	v = strings.TrimSpace(v)
	if utf8.RuneCountInString(v) > max {
		return "", problem.Invalid(field, "is too long")
	}
	if fault := linebreak.Fault(v); fault != "" {
		return "", problem.Invalid(field, fault)
	}
	if v != "" && visible.None(v) {
		return "", problem.Invalid(field, visible.FaultMessage)
	}
	return v, nil
}

// keptAsStored drops a patch's value that is the stored one sent back
// (linebreak.SentBack): the console's forms send every field. A value that
// changes is checked in full.
func keptAsStored(v *string, stored string) *string {
	if v != nil && linebreak.SentBack(*v, stored) {
		return nil
	}
	return v
}

func validEmail(field, v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", problem.Invalid(field, "is required")
	}
	a, err := mail.ParseAddress(v)
	if err != nil || a.Address != v || len(v) > maxEmailLen {
		return "", problem.Invalid(field, "must be an e-mail address such as ana@example.com")
	}
	return v, nil
}

// validPhone reads a number in the company's region ("" for none: the
// international form).
func validPhone(field, v string, isRequired bool, region string) (string, error) {
	if strings.TrimSpace(v) == "" {
		if isRequired {
			return "", problem.Invalid(field, "is required")
		}
		return "", nil
	}
	n, err := numplan.Normalize(v, region)
	if err != nil {
		return "", problem.Invalid(field, err.Error())
	}
	return n, nil
}

// validPassword applies the spec's length rule; strong adds signup's rule of
// one upper-case letter and one digit.
func validPassword(field, pw string, strong bool) error {
	n := utf8.RuneCountInString(pw)
	if n < minPasswordLen {
		return problem.Invalid(field, "must be at least 8 characters")
	}
	if n > maxPasswordLen {
		return problem.Invalid(field, "must be at most 1024 characters")
	}
	if !strong {
		return nil
	}
	var upper, digit bool
	for _, r := range pw {
		upper = upper || unicode.IsUpper(r)
		digit = digit || unicode.IsDigit(r)
	}
	if !upper || !digit {
		return problem.Invalid(field, "must contain at least one upper-case letter and one number")
	}
	return nil
}

func validRole(field, v string) (string, error) {
	if v != store.RoleAdmin && v != store.RoleMember {
		return "", problem.Invalid(field, "must be admin or member")
	}
	return v, nil
}

// validCountry accepts an ISO 3166 alpha-2 or alpha-3 code, in any case, of
// a country the numbering data knows (numplan.CheckCountry), and stores it
// upper-case.
func validCountry(field, v string) (string, error) {
	c, err := numplan.CheckCountry(v)
	if err != nil {
		return "", problem.Invalid(field, err.Error())
	}
	return c, nil
}

// keptCountry drops a patch's country that is the stored one sent back, in
// any case (keptAsStored): a code stored before codes were checked against
// the numbering data must not refuse the save of another field.
func keptCountry(v *string, stored string) *string {
	if v != nil && strings.EqualFold(strings.TrimSpace(*v), strings.TrimSpace(stored)) {
		return nil
	}
	return v
}

// check validates fields in order and keeps the first failure, so a caller
// reads as a list of fields and returns check.err once.
type check struct{ err error }

func (c *check) run(f func() (string, error)) string {
	if c.err != nil {
		return ""
	}
	out, err := f()
	c.err = err
	return out
}

func (c *check) required(field, v string, max int) string {
	return c.run(func() (string, error) { return required(field, v, max) })
}

func (c *check) optional(field, v string, max int) string {
	return c.run(func() (string, error) { return optional(field, v, max) })
}

func (c *check) email(field, v string) string {
	return c.run(func() (string, error) { return validEmail(field, v) })
}

func (c *check) phone(field, v string, isRequired bool, region string) string {
	return c.run(func() (string, error) { return validPhone(field, v, isRequired, region) })
}

func (c *check) role(field, v string) string {
	return c.run(func() (string, error) { return validRole(field, v) })
}

func (c *check) country(field, v string) string {
	return c.run(func() (string, error) { return validCountry(field, v) })
}

func (c *check) region(field, v string) string {
	return c.run(func() (string, error) {
		r, err := numplan.CheckRegion(v)
		if err != nil {
			return "", problem.Invalid(field, err.Error())
		}
		return r, nil
	})
}

func (c *check) password(field, pw string, strong bool) {
	if c.err == nil {
		c.err = validPassword(field, pw, strong)
	}
}

func (c *check) token(field, v string) {
	if c.err == nil && v == "" {
		c.err = problem.Invalid(field, "is required")
	}
}

// patch validates an optional patch field with f, leaving nil untouched.
func (c *check) patch(p *string, f func(string) string) *string {
	if p == nil || c.err != nil {
		return nil
	}
	out := f(*p)
	return &out
}
