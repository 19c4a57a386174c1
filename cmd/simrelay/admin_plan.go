package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/simrelay/simrelay/billing"
)

// adminSetPlan puts a company on a plan, active, without a payment
// provider: how a self-hosted operator grants or changes plans, hidden
// ones (unlimited) included.
func adminSetPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, where := adminFlags("set-plan", stderr)
	company := fs.Uint64("company", 0, "the company's id (required)")
	plan := fs.String("plan", "", "the plan's id (required), e.g. free, starter, pro, unlimited")
	plansFile := fs.String("plans", "", "the server's plans file, when it has one (default: the built-in plans)")
	fs.Usage = flagUsage(fs, "Usage: simrelay admin set-plan --company ID --plan ID [--plans FILE] [--data-dir D | --database-url URL]\n\n")
	if err := parseFlags(fs, args, 0); err != nil {
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
	where.existing = true
	st, err := openBackend(ctx, *where)
	if err != nil {
		return err
	}
	defer st.Close()
	svc, err := billing.New(billing.Config{Plans: plans}, st, slog.New(slog.NewTextHandler(io.Discard, nil)), backendClock(st))
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
