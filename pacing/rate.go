package pacing

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MinWindow is the shortest window a Rate accepts. RateLimit-Reset and
// Retry-After speak whole seconds, so a shorter window could not be told to
// clients honestly.
const MinWindow = time.Second

// Rate is a number of requests allowed per fixed window, as given to flags
// such as --rate-general 100/1m.
type Rate struct {
	Limit  int
	Window time.Duration
}

// rateForm is what a rate flag wants, said in every error about its form.
const rateForm = "want COUNT/WINDOW such as 100/1m"

// ParseRate reads the flag format COUNT/WINDOW, where WINDOW is a Go duration
// ("100/1m", "15/15m", "10/30s", "1000/1h"). Its error is written for the
// flag's user and names neither the flag nor the value, which the caller puts
// in front: --rate-general "100": want COUNT/WINDOW such as 100/1m.
func ParseRate(s string) (Rate, error) {
	count, window, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, errors.New(rateForm)
	}
	count, window = strings.TrimSpace(count), strings.TrimSpace(window)
	n, err := strconv.Atoi(count)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return Rate{}, fmt.Errorf("count %q is out of range", count)
		}
		return Rate{}, fmt.Errorf("count %q is not a whole number: %s", count, rateForm)
	}
	d, err := time.ParseDuration(window)
	if err != nil {
		// The time package's message repeats the input; ours says what is wanted.
		return Rate{}, fmt.Errorf("window %q is not a duration such as 30s, 1m or 1h: %s", window, rateForm)
	}
	r := Rate{Limit: n, Window: d}
	if msg := r.problem(); msg != "" {
		return Rate{}, errors.New(msg)
	}
	return r, nil
}

// Validate reports whether r can drive a limiter; Rates built in code rather
// than parsed from a flag go through the same rules.
func (r Rate) Validate() error {
	if msg := r.problem(); msg != "" {
		return fmt.Errorf("pacing: rate %s: %s", r, msg)
	}
	return nil
}

func (r Rate) problem() string {
	switch {
	case r.Limit < 1:
		return fmt.Sprintf("count must be at least 1, got %d", r.Limit)
	case r.Window < MinWindow:
		return fmt.Sprintf("window must be at least %s, got %s", MinWindow, r.Window)
	}
	return ""
}

// String gives the flag form, compact ("100/1m" rather than "100/1m0s") so
// that defaults print in --help as users would type them.
func (r Rate) String() string {
	return strconv.Itoa(r.Limit) + "/" + shortDuration(r.Window)
}

// shortDuration drops the zero units time.Duration.String keeps; the result
// still parses back with time.ParseDuration.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
