package store

// StatsQuery selects counters of one company over the days From to To
// (StatsDay numbers, both included). A nil set matches all; a non-nil empty
// one matches nothing.
type StatsQuery struct {
	CompanyID uint64
	From, To  uint32
	Users     map[uint64]bool
	Devices   map[uint64]bool // device registration ids
	// NoDevices leaves ByDevice empty for a question that needs only the
	// totals and the series: with no filter, they are then the company's
	// day sums alone, one record a day.
	NoDevices bool
}

// MaxStatsDays bounds one Stats query, which holds a counter per day: ten
// years, far beyond any range the API lets through.
const MaxStatsDays = 3660

// Stats is the sum of the counters a StatsQuery selects.
type Stats struct {
	Totals   Counts
	Days     []Counts          // one per day from From, zero days included
	ByDevice map[uint64]Counts // by device registration id, only those counted

	RecordsRead int // day records read: what the question cost
}

// StatsDevice is a device registration as the counters name it.
type StatsDevice struct {
	ID          uint64
	Fingerprint string
	Name        string
	Live        bool // the company's live registration of the fingerprint
}

// Summary is the dashboard's figures of one company.
type Summary struct {
	Totals        Counts // all time
	ActiveDevices int
	// PeriodSegments are the segments of the messages sent in the period.
	PeriodSegments uint64
	Recent         []Activity // newest first
}
