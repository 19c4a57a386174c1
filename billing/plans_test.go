package billing

import (
	"os"
	"path/filepath"
	"testing"
)

// A plans file that leaves features out still lists them as [] (the
// contract's features:[...]), never null.
func TestLoadPlansFeaturesNeverNull(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "plans.json")
	body := `{"plans":[{"id":"basic","name":"Basic","price":{"amount":500,"currency":"usd","interval":"month"},"limits":{"messages_per_month":10,"devices":1}}]}`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	plans, err := LoadPlans(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		if p.Features == nil {
			t.Errorf("plan %s: features nil, want []", p.ID)
		}
	}
}
