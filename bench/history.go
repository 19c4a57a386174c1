package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/simrelay/simrelay/store"
)

// The stored history: seedDevices devices, each talking with seedContacts
// numbers, the messages spread evenly.
const (
	seedDevices  = 50
	seedContacts = 200
	seedBatch    = 25000
)

func seedFingerprints() []string {
	out := make([]string, seedDevices)
	for i := range out {
		out[i] = fmt.Sprintf("seed-%02d", i)
	}
	return out
}

func contact(i int) string { return fmt.Sprintf("+1555%07d", i) }

// seedHistory stores total finished messages through the store's import, in
// created_at order, alternating outbound (delivered) and inbound; it stops
// between batches when ctx ends.
func seedHistory(ctx context.Context, st store.Backend, devices []string, total int) error {
	c, err := st.CompanyIDs()
	if err != nil || len(c) == 0 {
		return fmt.Errorf("bench: no company to seed: %v", err)
	}
	at := time.Now().Add(-time.Duration(total) * time.Millisecond).UTC()
	batch := make([]store.Message, 0, seedBatch)
	for i := range total {
		dev := devices[i%len(devices)]
		peer := contact((i / len(devices)) % seedContacts)
		id, _ := uuid.NewV7()
		m := store.Message{UUID: id.String(), CompanyID: c[0], Device: dev, Channel: "sms", Phone: peer, SIMSlot: "SIM1",
			Text: "a stored message of the benchmark's history", Segments: 1, CreatedAt: at, UpdatedAt: at}
		if i%2 == 0 {
			m.Direction, m.Status = store.Outbound, store.MsgDelivered
		} else {
			m.Direction, m.Status, m.ClientID, m.ReceivedAt = store.Inbound, store.MsgReceived, fmt.Sprint("seed-", i), at.Format(time.RFC3339)
		}
		at = at.Add(time.Millisecond)
		batch = append(batch, m)
		if len(batch) == seedBatch {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := st.ImportMessages(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		return st.ImportMessages(batch)
	}
	return nil
}

// lists measures the p99 of history pages and conversation lists. A
// request answered other than 200 fails the phase: a refused one is no
// figure of the list.
func lists(ctx context.Context, api *apiClient, devices []string, stored, queries int) (historyP99, convP99 float64, err error) {
	if stored == 0 {
		return 0, 0, nil
	}
	perConv := max(stored/(len(devices)*seedContacts), 1)
	pages := max(perConv/50, 1)
	var hist, convs []time.Duration
	for i := 0; i < queries && ctx.Err() == nil; i++ {
		q := url.Values{"device_fingerprint": {devices[rand.IntN(len(devices))]}, "phone": {contact(rand.IntN(seedContacts))},
			"page": {fmt.Sprint(1 + rand.IntN(pages))}, "limit": {"50"}}
		d, err := timed(api, "/chat/messages?"+q.Encode())
		if err != nil {
			return 0, 0, err
		}
		hist = append(hist, d)
		if i%4 == 0 {
			d, err := timed(api, "/chat/conversations?device_fingerprint="+devices[rand.IntN(len(devices))])
			if err != nil {
				return 0, 0, err
			}
			convs = append(convs, d)
		}
	}
	return pct(hist, 99), pct(convs, 99), nil
}

// timed is how long a GET of path took to be answered 200; any other
// answer is an error naming it.
func timed(api *apiClient, path string) (time.Duration, error) {
	start := time.Now()
	code, body, err := api.do("GET", path, nil)
	d := time.Since(start)
	switch {
	case err != nil:
		return 0, fmt.Errorf("bench: GET %s: %w", path, err)
	case code != http.StatusOK:
		return 0, fmt.Errorf("bench: GET %s answered %d: %s", path, code, bytes.TrimSpace(body))
	}
	return d, nil
}

// dashboards times the dashboard summary and 90 days of analytics over every
// device, both read from the counters the seeded history (and the earlier
// phases' sends) fed.
func dashboards(ctx context.Context, api *apiClient, queries int) (summary, analytics []time.Duration, err error) {
	to := time.Now().UTC()
	q := url.Values{"from": {to.AddDate(0, 0, -89).Format("2006-01-02")}, "to": {to.Format("2006-01-02")}}
	for i := 0; i < queries && ctx.Err() == nil; i++ {
		path := "/dashboard/summary"
		if i%2 == 1 {
			path = "/analytics?" + q.Encode()
		}
		d, err := timed(api, path)
		if err != nil {
			return nil, nil, err
		}
		if i%2 == 1 {
			analytics = append(analytics, d)
		} else {
			summary = append(summary, d)
		}
	}
	return summary, analytics, nil
}
