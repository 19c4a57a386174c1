package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/store/boltstore"
)

// adminSetPlan puts a company on a plan, active, without a payment
// provider: how a self-hosted operator grants or changes plans, hidden
// ones (unlimited) included.
func adminSetPlan(args []string, stdout, stderr io.Writer) error {
	fs, dir := adminFlags("set-plan", stderr)
	company := fs.Uint64("company", 0, "the company's id (required)")
	plan := fs.String("plan", "", "the plan's id (required), e.g. free, starter, pro, unlimited")
	plansFile := fs.String("plans", "", "the server's plans file, when it has one (default: the built-in plans)")
	fs.Usage = flagUsage(fs, "Usage: simrelay admin set-plan --company ID --plan ID [--plans FILE] [--data-dir D]\n\n")
	if err := parseAdminFlags(fs, args, 0); err != nil {
		return usageOrHelp(err)
	}
	if *company == 0 {
		return usageError{fmt.Errorf("--company: the company's id is required")}
	}
	if *plan == "" {
		return usageError{fmt.Errorf("--plan: the plan's id is required")}
	}
	var plans []billing.Plan
	if *plansFile != "" {
		var err error
		if plans, err = billing.LoadPlans(*plansFile); err != nil {
			return usageError{fmt.Errorf("--plans: %v", err)}
		}
	}
	st, err := openStore(*dir, boltstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	svc, err := billing.New(billing.Config{Plans: plans}, st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	if err != nil {
		return err
	}
	if _, ok := svc.Plan(*plan); !ok {
		return usageError{fmt.Errorf("--plan %q: no plan of that id", *plan)}
	}
	sub, err := svc.SetPlan(*company, *plan)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]any{"companyId": sub.CompanyID, "planId": sub.PlanID, "status": sub.Status})
}
