package problem

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"
)

// TestCatalogIsDocumented keeps docs/api.md's error table and the catalog in step:
// every code with its status, and no documented code the server never sends.
func TestCatalogIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (\\d{3}) \\|").FindAllStringSubmatch(string(doc), -1)
	documented := map[string]string{}
	for _, r := range rows {
		documented[r[1]] = r[2]
	}
	for _, c := range Codes() {
		want := fmt.Sprint(c.Status())
		if got, ok := documented[string(c)]; !ok {
			t.Errorf("code %s is not in docs/api.md's error table", c)
		} else if got != want {
			t.Errorf("code %s: docs say %s, the server answers %s", c, got, want)
		}
		delete(documented, string(c))
	}
	for code := range documented {
		t.Errorf("docs/api.md documents %s, which is not in the catalog", code)
	}
}

func TestStatusOfUnknownCode(t *testing.T) {
	t.Parallel()
	if got := Code("made_up").Status(); got != http.StatusInternalServerError {
		t.Errorf("got %d, want 500 for a code outside the catalog", got)
	}
	e := Invalid("owner.password", "is too short")
	if e.Status() != http.StatusBadRequest || !Is(fmt.Errorf("wrapped: %w", e), ValidationFailed) {
		t.Errorf("Invalid: got status %d", e.Status())
	}
}

// Invalid makes a predicate one sentence that names the field, keeps a
// sentence given whole, and Refield names another field in both.
func TestInvalidSentence(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ field, msg, want string }{
		{"limit", "must be from 1 to 100", "limit must be from 1 to 100."},
		{"owner.password", "is required", "owner.password is required."},
		{"phone", "must not begin with -.", "phone must not begin with -."},
		{"Stripe-Signature", "The Stripe-Signature header does not verify this body.", "The Stripe-Signature header does not verify this body."},
		{"", "must not hold the NUL character", "The input must not hold the NUL character."},
	} {
		e := Invalid(c.field, c.msg)
		if e.Message != c.want || e.Field != c.field || e.Code != ValidationFailed {
			t.Errorf("Invalid(%q, %q): got %q field %q code %s, want %q field %q", c.field, c.msg, e.Message, e.Field, e.Code, c.want, c.field)
		}
	}
	e := Invalid("sims[0].per_day", "must be 1 to 10000").Refield("per_day")
	if e.Field != "per_day" || e.Message != "per_day must be 1 to 10000." {
		t.Errorf("Refield: got %q field %q", e.Message, e.Field)
	}
	whole := Invalid("sig", "A sentence.").Refield("other")
	if whole.Field != "other" || whole.Message != "A sentence." {
		t.Errorf("Refield of a whole sentence: got %q field %q", whole.Message, whole.Field)
	}
}

// Count says 1 in the singular, every other amount in the plural.
func TestCount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		got, want string
	}{
		{Count(1, "device"), "1 device"},
		{Count(0, "second"), "0 seconds"},
		{Count(2, "second"), "2 seconds"},
		{Count(int64(1), "byte"), "1 byte"},
		{Count(int64(268435456), "byte"), "268435456 bytes"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestRetrySecondsRoundsUp(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{-time.Second, 1}, {0, 1}, {time.Nanosecond, 1}, {time.Second, 1}, {time.Second + time.Nanosecond, 2}, {1500 * time.Millisecond, 2}, {61 * time.Second, 61}} {
		if got := RetrySeconds(c.d); got != c.want {
			t.Errorf("RetrySeconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// InWords says a duration in its two largest units, at least a second;
// what is below the second unit rounds it up, never down, so that a wait
// in words is never shorter than the wait (a 1h0m30s wait said "1 hour").
func TestInWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "1 second"},
		{time.Millisecond, "1 second"},
		{time.Second, "1 second"},
		{45 * time.Second, "45 seconds"},
		{time.Minute, "1 minute"},
		{3 * time.Minute, "3 minutes"},
		{3*time.Minute + 20*time.Second, "3 minutes 20 seconds"},
		{15 * time.Minute, "15 minutes"},
		{time.Hour, "1 hour"},
		{time.Hour + 5*time.Minute, "1 hour 5 minutes"},
		{time.Hour + 5*time.Minute + 59*time.Second, "1 hour 6 minutes"},
		{time.Hour + 30*time.Second, "1 hour 1 minute"},
		{time.Hour + time.Nanosecond, "1 hour 1 minute"},
		{time.Hour + 59*time.Minute + time.Second, "2 hours"},
		{3*time.Minute + 20*time.Second + 500*time.Millisecond, "3 minutes 21 seconds"},
		{59*time.Second + time.Millisecond, "1 minute"},
		{59*time.Minute + 59*time.Second + 500*time.Millisecond, "1 hour"},
		{1500 * time.Millisecond, "2 seconds"},
		{24 * time.Hour, "24 hours"},
		{48 * time.Hour, "2 days"},
		{7 * 24 * time.Hour, "7 days"},
		{49 * time.Hour, "49 hours"},
		{47*time.Hour + 59*time.Minute + 30*time.Second, "2 days"},
		{math.MaxInt64, "2562047 hours 47 minutes"},
	} {
		if got := InWords(c.d); got != c.want {
			t.Errorf("InWords(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
