package pacing

import (
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Rate
	}{
		{"100/1m", Rate{100, time.Minute}},
		{"15/15m", Rate{15, 15 * time.Minute}},
		{"10/30s", Rate{10, 30 * time.Second}},
		{"1000/1h", Rate{1000, time.Hour}},
		{"1/1s", Rate{1, time.Second}},
		{"5/1m30s", Rate{5, 90 * time.Second}},
		{"5/1.5s", Rate{5, 1500 * time.Millisecond}},
		{"5/24h", Rate{5, 24 * time.Hour}},
		{" 100 / 1m ", Rate{100, time.Minute}},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if err != nil {
			t.Errorf("ParseRate(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseRate(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseRateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // a fragment of the message
	}{
		{"", "want COUNT/WINDOW such as 100/1m"},
		{"100", "want COUNT/WINDOW such as 100/1m"},
		{"100m", "want COUNT/WINDOW such as 100/1m"},
		{"0/1m", "count must be at least 1, got 0"},
		{"-5/1m", "count must be at least 1, got -5"},
		{"x/1m", `count "x" is not a whole number: want COUNT/WINDOW such as 100/1m`},
		{"1.5/1m", `count "1.5" is not a whole number`},
		{"/1m", `count "" is not a whole number`},
		{"99999999999999999999/1m", "out of range"},
		{"100/m", `window "m" is not a duration such as 30s, 1m or 1h: want COUNT/WINDOW such as 100/1m`},
		{"100/", `window "" is not a duration`},
		{"100/60", `window "60" is not a duration`},
		{"100/1m/2", `window "1m/2" is not a duration`},
		{"100/500ms", "window must be at least 1s, got 500ms"},
		{"100/0s", "window must be at least 1s, got 0s"},
		{"100/-1m", "window must be at least 1s, got -1m0s"},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if err == nil {
			t.Errorf("ParseRate(%q) = %+v, want an error containing %q", tt.in, got, tt.want)
			continue
		}
		msg := err.Error()
		// The caller names the flag and the value: the message is only what is wrong.
		if !strings.Contains(msg, tt.want) || strings.Contains(msg, "pacing") || strings.Contains(msg, "parse") {
			t.Errorf("ParseRate(%q) error: got %q, want one containing %q and no package prefix", tt.in, msg, tt.want)
		}
	}
}

func TestRateString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   Rate
		want string
	}{
		{Rate{100, time.Minute}, "100/1m"},
		{Rate{15, 15 * time.Minute}, "15/15m"},
		{Rate{10, 30 * time.Second}, "10/30s"},
		{Rate{1000, time.Hour}, "1000/1h"},
		{Rate{5, 90 * time.Second}, "5/1m30s"},
		{Rate{5, 90 * time.Minute}, "5/1h30m"},
		{Rate{5, time.Hour + time.Second}, "5/1h0m1s"},
		{Rate{5, 1500 * time.Millisecond}, "5/1.5s"},
		{Rate{5, 48 * time.Hour}, "5/48h"},
	}
	for _, tt := range tests {
		got := tt.in.String()
		if got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.in, got, tt.want)
		}
		back, err := ParseRate(got)
		if err != nil || back != tt.in {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v (round trip)", got, back, err, tt.in)
		}
	}
}

func TestRateValidate(t *testing.T) {
	t.Parallel()
	if err := (Rate{100, time.Minute}).Validate(); err != nil {
		t.Errorf("Validate(100/1m): got %v, want nil", err)
	}
	err := (Rate{0, time.Minute}).Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "pacing: rate 0/1m: ") {
		t.Errorf("Validate(0/1m): got %v, want a pacing: rate 0/1m error", err)
	}
}
