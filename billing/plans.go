// Package billing holds the plans, each company's subscription and the
// limits it allows. Without a payment provider (self-hosted mode) a change
// of plan takes effect at once; with one (Stripe), the provider's checkout
// and events drive it.
package billing

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
)

// Plan is one offer, as GET /plans shows it.
type Plan struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Price         Price    `json:"price"`
	TrialDays     int      `json:"trial_days"`
	Features      []string `json:"features"`
	Limits        Limits   `json:"limits"`
	StripePriceID string   `json:"stripe_price_id,omitempty"`
	// Hidden plans are assignable (the default, set-plan) but not listed.
	Hidden bool `json:"hidden,omitempty"`
}

// Price is in minor units (cents), as Stripe counts.
type Price struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Interval string `json:"interval"`
}

// Limits of a plan; nil is unlimited.
type Limits struct {
	MessagesPerMonth *int64 `json:"messages_per_month"`
	Devices          *int64 `json:"devices"`
}

// Ids of the built-in plans.
const (
	PlanFree      = "free"
	PlanStarter   = "starter"
	PlanPro       = "pro"
	PlanUnlimited = "unlimited"
)

// MaxTrialDays bounds a plan's trial (Stripe's own bound is 730 days).
const MaxTrialDays = 730

func limit(n int64) *int64 { return &n }

// BuiltinPlans are the plans without a --plans file: free, starter and pro,
// and the hidden unlimited plan a self-hosted server puts companies on.
func BuiltinPlans() []Plan {
	return []Plan{
		{ID: PlanFree, Name: "Free", Price: Price{0, "usd", "month"}, Features: []string{"1 device", "100 messages a month", "REST API and webhooks"},
			Limits: Limits{limit(100), limit(1)}},
		{ID: PlanStarter, Name: "Starter", Price: Price{900, "usd", "month"}, TrialDays: 14, Features: []string{"3 devices", "2,000 messages a month", "REST API and webhooks", "14-day trial"},
			Limits: Limits{limit(2000), limit(3)}},
		{ID: PlanPro, Name: "Pro", Price: Price{4900, "usd", "month"}, TrialDays: 14, Features: []string{"20 devices", "25,000 messages a month", "REST API and webhooks", "14-day trial"},
			Limits: Limits{limit(25000), limit(20)}},
		unlimitedPlan(),
	}
}

func unlimitedPlan() Plan {
	return Plan{ID: PlanUnlimited, Name: "Unlimited", Price: Price{0, "usd", "month"}, Features: []string{"no limits (self-hosted)"}, Hidden: true}
}

// PlansFile is the --plans file: {"plans": [Plan, ...]}.
type PlansFile struct {
	Plans []Plan `json:"plans"`
}

// LoadPlans reads and validates a plans file. The hidden unlimited plan is
// added unless the file defines a plan of that id.
func LoadPlans(path string) ([]Plan, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plans file: %w", err)
	}
	var f PlansFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("plans file %s: not valid JSON of the form {\"plans\":[...]}: %w", path, err)
	}
	if err := ValidatePlans(f.Plans); err != nil {
		return nil, fmt.Errorf("plans file %s: %w", path, err)
	}
	for i := range f.Plans {
		if f.Plans[i].Features == nil {
			f.Plans[i].Features = []string{} // the contract's features:[...], never null
		}
	}
	if !slices.ContainsFunc(f.Plans, func(p Plan) bool { return p.ID == PlanUnlimited }) {
		f.Plans = append(f.Plans, unlimitedPlan())
	}
	return f.Plans, nil
}

var (
	planIDPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	currencyPattern = regexp.MustCompile(`^[a-z]{3}$`)
)

// ValidatePlans checks every plan; the error names the plan and the field.
func ValidatePlans(plans []Plan) error {
	if len(plans) == 0 {
		return fmt.Errorf("no plans: want at least one in \"plans\"")
	}
	seen := map[string]bool{}
	for i, p := range plans {
		at := fmt.Sprintf("plans[%d]", i)
		if p.ID != "" {
			at = fmt.Sprintf("plan %q", p.ID)
		}
		switch {
		case !planIDPattern.MatchString(p.ID):
			return fmt.Errorf("%s: field id: want 1 to 64 of a-z, 0-9, _ and -, starting with a letter or digit", at)
		case seen[p.ID]:
			return fmt.Errorf("%s: field id: defined twice", at)
		case p.Name == "" || len(p.Name) > 100:
			return fmt.Errorf("%s: field name: want 1 to 100 bytes", at)
		case p.Price.Amount < 0:
			return fmt.Errorf("%s: field price.amount: must not be negative (minor units, e.g. 900 for 9.00)", at)
		case !currencyPattern.MatchString(p.Price.Currency):
			return fmt.Errorf("%s: field price.currency: want a lower-case ISO 4217 code such as usd", at)
		case p.Price.Interval != "month" && p.Price.Interval != "year":
			return fmt.Errorf("%s: field price.interval: want month or year", at)
		case p.TrialDays < 0 || p.TrialDays > MaxTrialDays:
			return fmt.Errorf("%s: field trial_days: want 0 to %d", at, MaxTrialDays)
		case p.Limits.MessagesPerMonth != nil && *p.Limits.MessagesPerMonth < 0:
			return fmt.Errorf("%s: field limits.messages_per_month: want null (unlimited) or at least 0", at)
		case p.Limits.Devices != nil && *p.Limits.Devices < 0:
			return fmt.Errorf("%s: field limits.devices: want null (unlimited) or at least 0", at)
		}
		seen[p.ID] = true
	}
	return nil
}
