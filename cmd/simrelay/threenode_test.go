package main

import (
	"net/http"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
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
	db     string             // the nodes' database
	nodes  map[string]*server // "a", "b", "c"; named "na", "nb", "nc"
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
		{"a form refused on A shows its error on the page C serves", testBannerAcrossNodes},
		{"the phone moves from A to C: its link on A closes with 4009", testPhoneMoves},
		{"a WhatsApp number's cap holds over three nodes", testCapAcrossNodes},
		{"a number paused on A holds its queued sends on B until resumed on C", testPauseAcrossNodes},
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
	c := &cluster3{db: db, nodes: map[string]*server{}}
	c.apiKey = createCompany(t, bin, testStore{dir: t.TempDir(), databaseURL: db})
	for _, n := range []string{"a", "b", "c"} {
		// Each node has its own data dir (held by it alone) and one database.
		st := testStore{dir: t.TempDir(), databaseURL: db}
		c.nodes[n] = startServer(t, bin, st, "--nats-url", bus, "--node-name", "n"+n,
			"--rate-general", "1000000/1m", "--webhook-allow-private", "--node-live-window", testLiveWindow)
	}
	reg := pairDevice(t, c.nodes["a"].url, c.apiKey, "cluster-phone")
	c.phone = &vphone{token: reg.DeviceToken, wire: map[string]int{}}
	return c
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
