package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/webhook/webhooktest"
)

// Soak sizes: a fleet coming back to a large backlog at once.
const (
	soakPhones = 200
	soakJobs   = 20000 // soakJobs/soakPhones per phone
	// soakJobsPostgres is the backlog of the PostgreSQL run: the same
	// fleet and the same rules, a tenth of the jobs, so the run stays within
	// make test's time on the 2-core test machine, whose cores the database
	// server shares (its drain rate there is not docs/performance.md's:
	// simrelay bench --database-url measures that).
	soakJobsPostgres = 2000
	// soakJobsRace is the backlog under the race detector (make test's
	// first pass): the same fleet of 200, each phone's window of 16 sends
	// refilled more than twice, for the detector to watch every link's
	// reader, writer and answerer and the store's commits at once; the
	// full 20,000 took 20 to 30 s of the package's time there, a fleet
	// that drained alone while the package's other tests waited.
	soakJobsRace = 8000
)

// TestSoakFleetDrainsABacklog: 200 reference-client phones connect over
// real WebSockets to a server holding 20,000 queued jobs for them (8,000
// under the race detector, 2,000 on PostgreSQL: the sizes above), and each
// acks every job and reports it sent and delivered as fast as it can, as an
// app with a good network would. The whole backlog must drain with no link
// ended by the server on the way (no flood close, no slow close), while
// another company's sends and inbound webhooks (to a real TLS receiver) keep
// flowing. The drain rate is logged, not asserted.
//
// It runs alone, before the package's parallel tests, and its store syncs
// every commit as the server's does: the links' deadlines are real, and the
// logged rate is docs/performance.md's.
func TestSoakFleetDrainsABacklog(t *testing.T) {
	jobs := soakJobs
	switch {
	case storetest.Postgres():
		jobs = soakJobsPostgres
	case raceEnabled:
		jobs = soakJobsRace
	}
	rc := webhooktest.NewReceiver(t, true, nil)
	e := newStoreEnv(t, storetest.Options{Durable: true}, whConfig(rc), roomy)
	acme := e.newCompany("Acme", "owner@acme.test")
	other := e.newCompany("Other", "owner@other.test")
	ctx := context.Background()

	// Acme's fleet, provisioned ahead (pairing 200 phones is not the point).
	fps := make([]string, soakPhones)
	for i := range fps {
		fps[i] = fmt.Sprintf("fleet-%03d", i)
	}
	devices := device.New(device.Config{PublicURL: e.url}, e.store, time.Now)
	tokens, err := devices.Provision(ctx, uint64(acme.id), uint64(acme.adminID), fps)
	if err != nil {
		t.Fatal(err)
	}
	// The backlog, queued while every phone is away: each phone's share in
	// one bulk send (how a campaign is queued), many at once, as many API
	// clients would: the store commits them in groups, one fsync each. The
	// queueing is not the point; one send at a time took a quarter of the
	// test under -race.
	queueing := time.Now()
	var wg sync.WaitGroup
	var queueErr atomic.Value
	const senders = 20
	for w := range senders {
		wg.Go(func() {
			for p := w; p < soakPhones; p += senders {
				items := make([]sms.BulkItem, 0, jobs/soakPhones)
				for i := p; i < jobs; i += soakPhones {
					items = append(items, sms.BulkItem{Phone: "+15551230000", Message: fmt.Sprint("backlog ", i)})
				}
				if _, _, err := e.sms.SendBulk(ctx, sms.BulkInput{CompanyID: uint64(acme.id), Device: fps[p], Messages: items}, nil); err != nil {
					queueErr.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := queueErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	t.Logf("soak: %d jobs queued in %s", jobs, time.Since(queueing).Round(time.Millisecond))

	// The other company: one phone that reports what it gets, a webhook.
	otherPhone := e.runPhone(e.pairPhone(other.apiKey, "other-phone"), "BOTH", true)
	e.whPut(other.apiKey, map[string]any{"url": rc.URL + "/other"})

	var received, closes atomic.Int64
	var unexpected sync.Map // what ended a link, when the test did not
	seen := make([]sync.Map, soakPhones)
	phones := make([]*client.Phone, soakPhones)
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	defer func() { stop(); running.Wait() }()
	begin := time.Now()
	for i := range phones {
		var p *client.Phone
		p = client.New(client.Config{
			WSURL: e.wsURL(), Token: tokens[i],
			Hello:       proto.Hello{AppVersion: "soak", SIMs: []proto.SIM{{Slot: "SIM1"}}},
			BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
			OnJob: func(s proto.Send) {
				if _, dup := seen[i].LoadOrStore(s.ID, true); !dup {
					received.Add(1)
				}
				p.Report(s.ID, proto.StatusSent, "")
				p.Report(s.ID, proto.StatusDelivered, "")
			},
			OnRetry: func(err error, _ time.Duration) {
				closes.Add(1)
				unexpected.Store(fmt.Sprintf("%s: %v", fps[i], err), true)
			},
		})
		phones[i] = p
		running.Go(func() { _ = p.Run(runCtx) })
	}

	// Meanwhile the other company sends and receives, one of each at a time.
	flowCtx, endFlow := context.WithCancel(ctx)
	var flow sync.WaitGroup
	var otherSent, otherInbound atomic.Int64
	flow.Go(func() {
		for i := 0; flowCtx.Err() == nil; i++ {
			r := e.do(call{method: "POST", path: "/chat/send", token: other.apiKey,
				body: map[string]any{"device_fingerprint": "other-phone", "phone": "+15557654321", "message": fmt.Sprint("other ", i)}})
			if r.Status != http.StatusOK {
				t.Errorf("the other company's send: got %d %s", r.Status, r.Raw)
				return
			}
			otherSent.Add(1)
			select {
			case <-otherPhone.Receive(proto.Inbound{ClientID: fmt.Sprint("other-in-", i), From: "+15550001111", Message: "hi"}):
				otherInbound.Add(1)
			case <-flowCtx.Done():
			}
		}
	})

	drained := func() bool {
		if received.Load() < int64(jobs) {
			return false
		}
		for _, p := range phones {
			if p.Pending() > 0 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(3 * time.Minute) // a bound for a stuck drain, not a speed target
	for !drained() && time.Now().Before(deadline) && closes.Load() == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(begin)
	endFlow()
	flow.Wait()
	unexpected.Range(func(k, _ any) bool {
		t.Errorf("a link ended during the drain: %v", k)
		return true
	})
	if !drained() {
		t.Fatalf("after %s: %d of %d jobs reached the phones, %d reports unacknowledged", took.Round(time.Millisecond), received.Load(), jobs, pendingOf(phones))
	}
	t.Logf("soak: %d phones drained %d jobs (ack, sent, delivered each) in %s: %.0f jobs/s; meanwhile the other company sent %d and received %d",
		soakPhones, jobs, took.Round(time.Millisecond), float64(jobs)/took.Seconds(), otherSent.Load(), otherInbound.Load())

	// Every report took effect: the store has the whole backlog delivered.
	for _, fp := range []string{fps[0], fps[soakPhones-1]} {
		r := e.do(call{method: "GET", path: "/chat/messages?device_fingerprint=" + fp + "&phone=%2B15551230000&limit=100", token: acme.apiKey})
		e.want(r, http.StatusOK, "")
		var body struct {
			Messages []struct{ Status string } `json:"messages"`
		}
		mustJSON(t, r.Raw, &body)
		if len(body.Messages) != jobs/soakPhones {
			t.Fatalf("%s: got %d messages, want %d", fp, len(body.Messages), jobs/soakPhones)
		}
		for _, m := range body.Messages {
			if m.Status != "delivered" {
				t.Fatalf("%s: got a message %q, want every one delivered", fp, m.Status)
			}
		}
	}
	// The other company's traffic went through: its sends reached its phone
	// and its inbound messages reached its webhook receiver.
	if otherSent.Load() == 0 || otherInbound.Load() == 0 {
		t.Fatalf("the other company sent %d and received %d during the drain, want both flowing", otherSent.Load(), otherInbound.Load())
	}
	e.eventually("the other company's sends reach its phone", func() bool { return int64(len(otherPhone.Jobs())) >= otherSent.Load() })
	e.eventually("the other company's webhooks arrive", func() bool { return int64(len(rc.Requests())) >= otherInbound.Load() })
}

func pendingOf(phones []*client.Phone) int {
	n := 0
	for _, p := range phones {
		n += p.Pending()
	}
	return n
}
