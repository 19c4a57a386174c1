package web

import (
	"net/http"
	"time"

	"github.com/simrelay/simrelay/store"
)

// Overview figures.
const (
	chartDays      = 30
	recentActivity = 10
)

func (c *Console) overviewRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Prefix+"/{$}", c.page(member, c.overview))
}

type overviewData struct {
	Summary store.Summary
	Days    []dayRow
	Totals  store.Counts
	Chart   any
	From    time.Time
}

type dayRow struct {
	Date time.Time
	store.Counts
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, q *req) error {
	company := q.p().CompanyID
	from, to := c.period(company)
	sum, err := c.deps.Analytics.DashboardSummary(company, from, to, recentActivity)
	if err != nil {
		return err
	}
	today := c.deps.Now().UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, -(chartDays - 1))
	st, err := c.deps.Analytics.Stats(store.StatsQuery{CompanyID: company, From: store.StatsDay(first), To: store.StatsDay(today), NoDevices: true})
	if err != nil {
		return err
	}
	data := overviewData{Summary: sum, Totals: st.Totals, Chart: lineChart(first, st.Days), From: first}
	for i, d := range st.Days {
		data.Days = append(data.Days, dayRow{Date: first.AddDate(0, 0, i), Counts: d})
	}
	c.render(w, r, http.StatusOK, "overview", c.viewFor(q, "Overview", data))
	return nil
}

// period is the billing period creditsUsed counts over: the calendar month
// without billing, as the API's dashboard has it.
func (c *Console) period(company uint64) (time.Time, time.Time) {
	if c.deps.Period != nil {
		return c.deps.Period.Period(company)
	}
	now := c.deps.Now().UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	return from, from.AddDate(0, 1, 0)
}
