package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/android-protocol/client"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/storetest"
)

// The three-node test (contract section 12, issue 23): three `simrelay
// serve` processes on one PostgreSQL database and one NATS server (embedded
// in the test process), a virtual phone moving between them. One test with
// subtests in order, sharing the nodes, keeps `make test` short; each
// subtest bounds its own waits. The file threenode_cases_test.go holds the
// cases past the phone's first link.

// cluster3 is the running cluster of one test.
type cluster3 struct {
	apiKey string
	nodes  map[string]*server // "a", "b", "c"
	phone  *vphone
}

// clusterWait bounds every wait of the test for something the cluster
// should do at once (a signal over the bus, a pump from the database): far
// more than it takes on a loaded machine, far less than the test's budget.
const clusterWait = 15 * time.Second

// TestThreeNodes runs on PostgreSQL by nature, so it runs once: in the
// first pass of `make test`, not again in the pass that runs the server's
// suites on PostgreSQL.
func TestThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if storetest.Postgres() {
		t.Skip("a PostgreSQL test by nature: the first pass of make test runs it")
	}
	t.Parallel()
	c := startCluster3(t)
	for _, sub := range []struct {
		name string
		fn   func(*testing.T, *cluster3)
	}{
		{"a send on B reaches the phone on A, and a scheduled send too", testSendAcrossNodes},
		{"the live view on C shows a status reported through A", testLiveViewAcrossNodes},
		{"the phone moves from A to C: its link on A closes with 4009", testPhoneMoves},
		{"a WhatsApp number's cap holds over three nodes", testCapAcrossNodes},
		{"each webhook delivery arrives once", testWebhooksOnce},
		{"a key rotated on A is refused on C at once", testKeyRotation},
		{"kill -9 of the phone's node in a burst loses no answered send", testKillPhoneNode},
	} {
		t.Run(sub.name, func(t *testing.T) { sub.fn(t, c) })
	}
}

// startCluster3 starts the database, the bus, the company and the three
// nodes, and pairs the phone (not linked yet).
func startCluster3(t *testing.T) *cluster3 {
	t.Helper()
	bin := buildBinary(t)
	db := pgtest.URL(t)
	bus := natstest.Start(t)
	c := &cluster3{nodes: map[string]*server{}}
	c.apiKey = createCompany(t, bin, testStore{dir: t.TempDir(), databaseURL: db})
	for _, n := range []string{"a", "b", "c"} {
		// Each node has its own data dir (held by it alone) and one database.
		st := testStore{dir: t.TempDir(), databaseURL: db}
		c.nodes[n] = startServer(t, bin, st, "--nats-url", bus, "--node-name", "n"+n,
			"--rate-general", "1000000/1m", "--webhook-allow-private")
	}
	code, err := pairingCode(context.Background(), c.nodes["a"].url, c.apiKey)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := client.Register(context.Background(), nil, c.nodes["a"].url, client.RegisterInput{PairingCode: code, DeviceFingerprint: "cluster-phone"})
	if err != nil {
		t.Fatal(err)
	}
	c.phone = &vphone{reg: reg, wire: map[string]int{}}
	return c
}

// vphone is one paired phone whose links may go to any node; it counts
// each job id it received over all its links (the phone's journal dedupes
// by id, so distinct ids are what reached it as SMS; more than one on the
// wire is a duplicate the journal absorbed).
type vphone struct {
	reg  client.Registration
	mu   sync.Mutex
	wire map[string]int // job id -> times received on the wire
}

// link is one link of the phone to one node, until stop.
type link struct {
	ph     *client.Phone
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	closes []int // close codes that ended links
}

func wsURL(s *server) string { return "ws" + strings.TrimPrefix(s.url, "http") + "/device/ws" }

// linkTo links the phone to node s. Each job is counted, acked, then
// reported sent and delivered, as a real phone does.
func (v *vphone) linkTo(t *testing.T, s *server) *link {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &link{done: make(chan error, 1), cancel: cancel}
	l.ph = client.New(client.Config{WSURL: wsURL(s), Token: v.reg.DeviceToken,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		OnJob: func(job proto.Send) {
			v.mu.Lock()
			v.wire[job.ID]++
			v.mu.Unlock()
			l.ph.Report(job.ID, proto.StatusSent, "")
			l.ph.Report(job.ID, proto.StatusDelivered, "")
		},
		OnRetry: func(err error, _ time.Duration) {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				l.mu.Lock()
				l.closes = append(l.closes, int(ce.Code))
				l.mu.Unlock()
				if int(ce.Code) == proto.CloseReplaced {
					// The phone moved to another node: this link stays
					// down rather than take the device back after its wait.
					cancel()
				}
			}
		},
	})
	go func() { l.done <- l.ph.Run(ctx) }()
	t.Cleanup(l.stop)
	waitFor(t, "the phone's link", func() bool { return l.ph.Connected() })
	return l
}

// stop ends the link and waits for its goroutine.
func (l *link) stop() {
	if l.cancel != nil {
		l.cancel()
		<-l.done
		l.cancel = nil
	}
}

func (l *link) closedWith(code int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.closes {
		if c == code {
			return true
		}
	}
	return false
}

// got says whether the phone received job id.
func (v *vphone) got(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.wire[id] > 0
}

// waitFor polls cond until it holds, failing t after clusterWait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, clusterWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sendSMS sends one SMS to the cluster's phone through node s and answers
// its queue id.
func (c *cluster3) sendSMS(t *testing.T, s *server, text string, extra map[string]any) string {
	t.Helper()
	body := map[string]any{"device_fingerprint": "cluster-phone", "phone": "+15551234567", "message": text}
	for k, v := range extra {
		body[k] = v
	}
	st, out := call(t, "POST", s.url+"/chat/send", c.apiKey, body)
	id, _ := out["queueId"].(string)
	if st != http.StatusOK && st != http.StatusAccepted || id == "" {
		t.Fatalf("send %q: %d %v", text, st, out)
	}
	return id
}

func testSendAcrossNodes(t *testing.T, c *cluster3) {
	l := c.phone.linkTo(t, c.nodes["a"])
	defer l.stop()
	id := c.sendSMS(t, c.nodes["b"], "sent on b", nil)
	waitFor(t, "the send made on B at the phone on A", func() bool { return c.phone.got(id) })
	// Whole seconds: a second or two ahead, released by whichever node.
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	id = c.sendSMS(t, c.nodes["c"], "scheduled on c", map[string]any{"send_at": at})
	waitFor(t, "the scheduled send at the phone on A", func() bool { return c.phone.got(id) })
}

func testPhoneMoves(t *testing.T, c *cluster3) {
	onA := c.phone.linkTo(t, c.nodes["a"])
	defer onA.stop()
	onC := c.phone.linkTo(t, c.nodes["c"])
	waitFor(t, "the link on A closed with 4009", func() bool { return onA.closedWith(proto.CloseReplaced) })
	id := c.sendSMS(t, c.nodes["b"], "after the move", nil)
	waitFor(t, "a send at the phone on C", func() bool { return c.phone.got(id) })
	onC.stop()
}
