package httpapi

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// Analytics is what the dashboard and analytics routes read: counters kept
// as messages change (boltstore.Store), never a walk of the messages.
type Analytics interface {
	Stats(q store.StatsQuery) (store.Stats, error)
	DashboardSummary(companyID uint64, from, to time.Time, limit int) (store.Summary, error)
	StatsDevices(companyID uint64) ([]store.StatsDevice, error)
	CompanyUsers(companyID uint64) ([]store.User, error)
	// Generation changes with every write to the store: analytics answers
	// are kept while it stays the same (answerCache).
	Generation() (uint64, error)
}

// Period is the company's current billing period, over which creditsUsed
// counts: the calendar month while billing is self-hosted (CalendarMonth),
// the subscription's period once billing says so.
type Period interface {
	Period(companyID uint64) (from, to time.Time)
}

// CalendarMonth is the current UTC calendar month for every company.
type CalendarMonth struct{ Now func() time.Time }

// Period is the month of now, from its first day to the first of the next.
func (m CalendarMonth) Period(uint64) (time.Time, time.Time) {
	now := m.Now().UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	return from, from.AddDate(0, 1, 0)
}

// Bounds of the analytics range.
const (
	// DefaultAnalyticsDays is the range when from and to are absent: the last 30 days, today included.
	DefaultAnalyticsDays = 30
	// MaxAnalyticsDays is the longest range one request may ask for: a year,
	// leap day included, so each answer holds at most 366 series items.
	MaxAnalyticsDays = 366
	// RecentActivityItems is how many events the dashboard shows.
	RecentActivityItems = 10
	// maxFilterItems bounds the ids of one users or devices filter.
	maxFilterItems = 500
)

const dateLayout = "2006-01-02"

type activityJSON struct {
	Type        string `json:"type"`
	At          string `json:"at"`
	Description string `json:"description"`
}

func (s *Server) dashboardSummary(c echo.Context) error {
	company := principal(c).CompanyID
	from, to := s.period().Period(company)
	sum, err := s.deps.Analytics.DashboardSummary(company, from, to, RecentActivityItems)
	if err != nil {
		return err
	}
	recent := make([]activityJSON, 0, len(sum.Recent))
	for _, e := range sum.Recent {
		recent = append(recent, activityJSON{Type: e.Type, At: ts(e.At), Description: e.Description})
	}
	return c.JSON(http.StatusOK, map[string]any{
		"totalMessagesSent": sum.Totals.Sent, "activeDevices": sum.ActiveDevices, "creditsUsed": sum.PeriodSegments, "recentActivity": recent,
		"period": map[string]string{"from": ts(from), "to": ts(to)},
	})
}

func (s *Server) period() Period {
	if s.deps.Period != nil {
		return s.deps.Period
	}
	return CalendarMonth{Now: s.deps.Now}
}

type countsJSON struct {
	Sent      uint64 `json:"sent"`
	Delivered uint64 `json:"delivered"`
	Failed    uint64 `json:"failed"`
	Received  uint64 `json:"received"`
	Expired   uint64 `json:"expired"`
}

func countsOut(c store.Counts) countsJSON {
	return countsJSON{Sent: c.Sent, Delivered: c.Delivered, Failed: c.Failed, Received: c.Received, Expired: c.Expired}
}

type byDeviceJSON struct {
	DeviceFingerprint string `json:"device_fingerprint"`
	DeviceName        string `json:"device_name"`
	countsJSON
}

// analyticsRange reads from and to (UTC days, both included).
func (s *Server) analyticsRange(c echo.Context) (from, to time.Time, err error) {
	parse := func(name string) (time.Time, bool, error) {
		v := c.QueryParam(name)
		if v == "" {
			return time.Time{}, false, nil
		}
		t, err := time.Parse(dateLayout, v)
		if err != nil {
			return t, true, problem.Invalid(name, "must be a date as YYYY-MM-DD")
		}
		return t, true, nil
	}
	from, hasFrom, err := parse("from")
	if err != nil {
		return from, to, err
	}
	to, hasTo, err := parse("to")
	if err != nil {
		return from, to, err
	}
	if !hasTo {
		to = s.deps.Now().UTC().Truncate(24 * time.Hour)
		if hasFrom && to.Before(from) {
			to = from
		}
	}
	if !hasFrom {
		from = to.AddDate(0, 0, -(DefaultAnalyticsDays - 1))
	}
	if from.After(to) {
		return from, to, problem.Invalid("from", "must not be after to")
	}
	if days := int(to.Sub(from)/(24*time.Hour)) + 1; days > MaxAnalyticsDays {
		field := "to"
		if hasFrom {
			field = "from"
		}
		return from, to, problem.Invalid(field, "makes the range "+strconv.Itoa(days)+" days long; at most "+strconv.Itoa(MaxAnalyticsDays)+" are allowed")
	}
	return from, to, nil
}

// queryList splits a comma-separated filter; absent is nil.
func queryList(c echo.Context, name string) ([]string, error) {
	v := c.QueryParam(name)
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxFilterItems {
		return nil, problem.Invalid(name, "must list at most "+strconv.Itoa(maxFilterItems)+" ids")
	}
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		if parts[i] == "" {
			return nil, problem.Invalid(name, "must be ids separated by commas, none empty")
		}
	}
	return parts, nil
}

// userFilter turns the users filter into counter users: ids of other
// companies or of nobody match nothing, and the company's first admin also
// stands for the API key's sends (counted as user 0).
func (s *Server) userFilter(c echo.Context, company uint64) (map[uint64]bool, error) {
	ids, err := queryList(c, "users")
	if err != nil || ids == nil {
		return nil, err
	}
	set := map[uint64]bool{}
	for _, v := range ids {
		// Digits past the largest id name no user (store.NoID, which is
		// StatsNoUser): it counts nothing, as any unknown id.
		id, ok := queryID(v)
		if !ok {
			return nil, problem.Invalid("users", "must be user ids (positive whole numbers in digits without leading zeros) separated by commas")
		}
		if id == store.StatsNoUser {
			continue // the counters of inbound messages, no user's
		}
		set[id] = true
	}
	users, err := s.deps.Analytics.CompanyUsers(company)
	if err != nil {
		return nil, err
	}
	for _, u := range users { // in id order: the first admin is the oldest
		if u.Role == store.RoleAdmin {
			if set[u.ID] {
				set[0] = true
			}
			break
		}
	}
	return set, nil
}

func (s *Server) analytics(c echo.Context) error {
	company := principal(c).CompanyID
	from, to, err := s.analyticsRange(c)
	if err != nil {
		return err
	}
	gen, err := s.deps.Analytics.Generation() // before any read of the answer
	if err != nil {
		return err
	}
	key := answerKey(company, from.Format(dateLayout), to.Format(dateLayout), c.QueryParam("users"), c.QueryParam("devices"))
	if body := s.answers.get(gen, key); body != nil {
		return writeAnalytics(c, body)
	}
	users, err := s.userFilter(c, company)
	if err != nil {
		return err
	}
	fps, err := queryList(c, "devices")
	if err != nil {
		return err
	}
	regs, err := s.deps.Analytics.StatsDevices(company)
	if err != nil {
		return err
	}
	var devices map[uint64]bool
	if fps != nil {
		named := make(map[string]bool, len(fps))
		for _, fp := range fps {
			named[fp] = true
		}
		devices = map[uint64]bool{}
		for _, r := range regs {
			if named[r.Fingerprint] {
				devices[r.ID] = true // every registration of the fingerprint in this company
			}
		}
	}
	q := store.StatsQuery{CompanyID: company, From: store.StatsDay(from), To: store.StatsDay(to), Users: users, Devices: devices}
	st, err := s.deps.Analytics.Stats(q)
	if err != nil {
		return err
	}
	body := appendAnalytics(make([]byte, 0, analyticsSize(len(st.Days), len(st.ByDevice))), from, to, st, byDevice(regs, devices, st.ByDevice))
	s.answers.put(gen, key, body)
	return writeAnalytics(c, body)
}

// writeAnalytics sends an encoded answer, compact as every JSON answer is
// (compactJSON).
func writeAnalytics(c echo.Context, body []byte) error {
	return c.JSONBlob(http.StatusOK, body)
}

// analyticsSize is about the length of an analytics answer: a fleet's
// byDevice runs to a megabyte, which one allocation then holds.
func analyticsSize(days, devices int) int { return 256 + 112*days + 160*devices }

// appendAnalytics writes the analytics answer as encoding/json writes its
// map (keys sorted, HTML escaped, a newline at the end), byte for byte, but
// without reflection: with byDevice listing thousands of phones, encoding
// was a third of the answer's time.
func appendAnalytics(b []byte, from, to time.Time, st store.Stats, devices []byDeviceJSON) []byte {
	b = append(b, `{"byDevice":[`...)
	for i, d := range devices {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"device_fingerprint":`...)
		b = appendJSONString(b, d.DeviceFingerprint)
		b = append(b, `,"device_name":`...)
		b = appendJSONString(b, d.DeviceName)
		b = appendCounts(append(b, ','), d.countsJSON)
	}
	b = append(append(append(b, `],"from":"`...), from.Format(dateLayout)...), `","series":[`...)
	for i, d := range st.Days {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, `{"date":"`...), from.AddDate(0, 0, i).Format(dateLayout)...), `",`...)
		b = appendCounts(b, countsOut(d))
	}
	b = append(append(append(b, `],"to":"`...), to.Format(dateLayout)...), `","totals":{`...)
	b = appendCounts(b, countsOut(st.Totals))
	return append(b, "}\n"...)
}

// appendCounts writes the counts' fields and the object's closing brace.
func appendCounts(b []byte, c countsJSON) []byte {
	for _, f := range [...]struct {
		key string
		n   uint64
	}{{`"sent":`, c.Sent}, {`,"delivered":`, c.Delivered}, {`,"failed":`, c.Failed}, {`,"received":`, c.Received}, {`,"expired":`, c.Expired}} {
		b = strconv.AppendUint(append(b, f.key...), f.n, 10)
	}
	return append(b, '}')
}

// appendJSONString writes s as encoding/json does: plain ASCII as it is,
// anything else (quotes, controls, HTML's <, > and &, non-ASCII) through
// encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// byDevice merges the registrations of each fingerprint: those with counts
// in the range, and the live devices a devices filter names (at zero), so a
// fleet of thousands of idle phones does not bloat every answer. Sorted by
// fingerprint, then id (the order regs come in), the registrations of one
// fingerprint lie together and merge in one pass.
func byDevice(regs []store.StatsDevice, filter map[uint64]bool, counts map[uint64]store.Counts) []byDeviceJSON {
	type listed struct {
		reg *store.StatsDevice
		n   store.Counts
	}
	list := make([]listed, 0, len(counts))
	for i := range regs {
		r := &regs[i]
		n, counted := counts[r.ID]
		if (filter != nil && !filter[r.ID]) || (!counted && (filter == nil || !r.Live)) {
			continue
		}
		list = append(list, listed{r, n})
	}
	order := make([]int32, len(list)) // sorting these moves 4 bytes, not a listed
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		ra, rb := list[a].reg, list[b].reg
		return cmp.Or(strings.Compare(ra.Fingerprint, rb.Fingerprint), cmp.Compare(ra.ID, rb.ID))
	})
	out := make([]byDeviceJSON, 0, len(list))
	prev := ""
	for _, i := range order {
		l := list[i]
		if len(out) == 0 || l.reg.Fingerprint != prev {
			out = append(out, byDeviceJSON{DeviceFingerprint: l.reg.Fingerprint})
			prev = l.reg.Fingerprint
		}
		item := &out[len(out)-1]
		if l.reg.Live || item.DeviceName == "" {
			item.DeviceName = l.reg.Name
		}
		t := &item.countsJSON
		t.Sent, t.Delivered, t.Failed, t.Received, t.Expired = t.Sent+l.n.Sent, t.Delivered+l.n.Delivered, t.Failed+l.n.Failed, t.Received+l.n.Received, t.Expired+l.n.Expired
	}
	return out
}

func (s *Server) analyticsDevices(c echo.Context) error {
	regs, err := s.deps.Analytics.StatsDevices(principal(c).CompanyID)
	if err != nil {
		return err
	}
	type item struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	names := map[string]string{}
	var order []string
	for _, r := range regs {
		old, seen := names[r.Fingerprint]
		if !seen {
			order = append(order, r.Fingerprint)
		}
		if r.Live || old == "" {
			names[r.Fingerprint] = r.Name
		}
	}
	slices.Sort(order)
	out := make([]item, 0, len(order))
	for _, fp := range order {
		name := names[fp]
		if name == "" {
			name = fp
		}
		out = append(out, item{ID: fp, Name: name})
	}
	return c.JSON(http.StatusOK, map[string]any{"devices": out})
}
