package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/natstest"
	"github.com/simrelay/simrelay/internal/pgtest"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
)

// A WhatsApp number moving between agents linked to different nodes of a
// cluster (PROTOCOL.md section 16.1, docs/cluster.md): the job the former
// agent was handed on one node, its ack lost with its link, never goes to
// the agent that announced the number on another node, which gets the
// sends never handed at once; the former agent, back on a third node
// without the number, reports it; or, back there saying its journal holds
// none (hello.jobs), the job goes to the new agent on its node; or its
// deletion through another node's API hands it to the new agent, linked
// where the former one was. An agent that links again announcing no
// number lets it go, on every node.

const clusterMoveNumber = "+15550108888"

// agentLink is an agent's raw link to a node; a goroutine reads its
// frames into frames (closed when the link ends), so that a wait for a
// frame that does not come leaves the link up.
type agentLink struct {
	t      *testing.T
	ws     *websocket.Conn
	frames chan proto.Frame
}

// linkAgent dials the node with the agent's token and says hello with the
// numbers; it waits for the welcome.
func linkAgent(t *testing.T, s *server, token string, numbers ...string) *agentLink {
	t.Helper()
	return linkAgentHolding(t, s, token, nil, numbers...)
}

// linkAgentHolding is linkAgent with the hello's jobs (nil: none said).
func linkAgentHolding(t *testing.T, s *server, token string, jobs []string, numbers ...string) *agentLink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.url, "http")+"/device/ws",
		&websocket.DialOptions{HTTPClient: testhttp.Client, HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	l := &agentLink{t: t, ws: ws, frames: make(chan proto.Frame, 64)}
	done := make(chan struct{})
	t.Cleanup(func() { ws.CloseNow(); <-done })
	go func() {
		defer close(done)
		defer close(l.frames)
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			f, err := proto.Decode(data)
			if err != nil {
				t.Errorf("decode %s: %v", data, err)
				return
			}
			l.frames <- f
		}
	}()
	hello := proto.Hello{Protocol: 1, AppVersion: "cluster agent test", Jobs: jobs}
	for _, n := range numbers {
		hello.WhatsApp = append(hello.WhatsApp, proto.WhatsAppNumber{Phone: n})
	}
	l.write(hello)
	if f, ok := l.read(10 * time.Second).(*proto.Welcome); !ok {
		t.Fatalf("got %#v, want a welcome", f)
	}
	return l
}

func (l *agentLink) write(f proto.Frame) {
	l.t.Helper()
	data, err := proto.Encode(f)
	if err != nil {
		l.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.ws.Write(ctx, websocket.MessageText, data); err != nil {
		l.t.Fatal(err)
	}
}

// read answers the next frame within d; nil when none came or the link
// ended.
func (l *agentLink) read(d time.Duration) proto.Frame {
	select {
	case f := <-l.frames:
		return f
	case <-time.After(d):
		return nil
	}
}

// nextSend reads frames for up to d until a send; nil when none came.
func (l *agentLink) nextSend(d time.Duration) *proto.Send {
	l.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		switch f := l.read(time.Until(end)).(type) {
		case nil:
			return nil
		case *proto.Send:
			return f
		}
	}
	return nil
}

// report acks the job and reports it sent, and waits for its status_ack.
func (l *agentLink) report(id string) {
	l.t.Helper()
	l.write(proto.Ack{ID: id})
	l.write(proto.Status{ID: id, Status: proto.StatusSent, At: time.Now().UTC().Format(time.RFC3339)})
	end := time.Now().Add(clusterWait)
	for time.Now().Before(end) {
		switch f := l.read(time.Until(end)).(type) {
		case nil:
			l.t.Fatalf("the link closed before the status_ack of %s", id)
		case *proto.StatusAck:
			if f.ID == id {
				return
			}
		case *proto.Error:
			l.t.Fatalf("the report of %s: %+v", id, f)
		}
	}
	l.t.Fatalf("no status_ack of %s", id)
}

// whatsAppSend sends through the company's one WhatsApp number on node s
// and answers the message's id.
func whatsAppSend(t *testing.T, s *server, key, text string) string {
	t.Helper()
	_, body := get(t, s.url+"/whatsapp/numbers", key)
	var wa struct {
		Numbers []struct {
			NumberID string `json:"number_id"`
		}
	}
	if err := json.Unmarshal(body, &wa); err != nil || len(wa.Numbers) != 1 {
		t.Fatalf("the numbers: %s", body)
	}
	st, out := call(t, "POST", s.url+"/whatsapp/send", key, map[string]any{"number_id": wa.Numbers[0].NumberID, "to": "+15551234567", "content": text})
	id, _ := out["id"].(string)
	if st != http.StatusAccepted || id == "" {
		t.Fatalf("send %q: %d %v", text, st, out)
	}
	return id
}

// whatsAppStatus is the message's status as node s answers it.
func whatsAppStatus(t *testing.T, s *server, key, id string) string {
	t.Helper()
	st, out := call(t, "GET", s.url+"/whatsapp/messages/"+id, key, nil)
	if st != http.StatusOK {
		t.Fatalf("GET the message %s: %d %v", id, st, out)
	}
	status, _ := out["status"].(string)
	return status
}

// TestClusterAgentMove runs three nodes on one database and one bus, with
// a link sweep of 500 ms: every sweep kicks the new agent's link, which
// reads the job it passed over again and passes it over again while the
// former agent exists.
func TestClusterAgentMove(t *testing.T) {
	clusterTest(t)
	bin := buildBinary(t)
	db := pgtest.URL(t)
	bus := natstest.Start(t)
	key := createCompany(t, bin, testStore{dir: t.TempDir(), databaseURL: db})
	flags := []string{"--nats-url", bus, "--rate-general", "1000000/1m", "--link-sweep", "500ms", "--public-url", "http://127.0.0.1",
		"--node-live-window", testLiveWindow, "--whatsapp-gap-min", "10ms", "--whatsapp-gap-max", "20ms", "--whatsapp-per-minute", "100"}
	nodes := make([]*server, 3)
	for i := range nodes {
		nodes[i] = startServer(t, bin, testStore{dir: t.TempDir(), databaseURL: db}, append(flags, "--node-name", string(rune('a'+i)))...)
	}
	for _, kind := range []string{"reported", "released", "deleted", "let-go"} {
		t.Run(kind, func(t *testing.T) {
			tokenA, tokenB := pairDevice(t, nodes[0].url, key, "move-a-"+kind).DeviceToken, pairDevice(t, nodes[0].url, key, "move-b-"+kind).DeviceToken
			a := linkAgent(t, nodes[0], tokenA, clusterMoveNumber)
			if kind == "let-go" {
				clusterLetGo(t, nodes, key, tokenA, tokenB)
				return
			}
			taken := whatsAppSend(t, nodes[1], key, "taken by A "+kind)
			if s := a.nextSend(clusterWait); s == nil || s.ID != taken {
				t.Fatalf("A got %+v, want %s", s, taken)
			}
			a.ws.CloseNow() // the ack never came

			bNode := nodes[1]
			if kind == "deleted" {
				bNode = nodes[0]
			}
			b := linkAgent(t, bNode, tokenB, clusterMoveNumber)
			fresh := whatsAppSend(t, nodes[2], key, "never handed "+kind)
			if s := b.nextSend(clusterWait); s == nil || s.ID != fresh {
				t.Fatalf("B got %+v, want only %s", s, fresh)
			}
			b.report(fresh)
			if kind == "reported" {
				back := linkAgent(t, nodes[2], tokenA)
				back.report(taken)
				poll.Within(t, clusterWait, "A's report read on B's node", func() bool { return whatsAppStatus(t, nodes[1], key, taken) == "sent" })
				if s := b.nextSend(2 * time.Second); s != nil {
					t.Fatalf("B got %s after A reported %s", s.ID, taken)
				}
				return
			}
			if kind == "released" {
				// A's journal never took the job: its release on c
				// reaches B's link on b.
				linkAgentHolding(t, nodes[2], tokenA, []string{})
				s := b.nextSend(clusterWait)
				if s == nil || s.ID != taken {
					t.Fatalf("B got %+v once A said it holds nothing, want %s", s, taken)
				}
				b.report(taken)
				poll.Within(t, clusterWait, "B's report read on A's node", func() bool { return whatsAppStatus(t, nodes[2], key, taken) == "sent" })
				return
			}
			if s := b.nextSend(2 * time.Second); s != nil {
				t.Fatalf("B got %s while A exists", s.ID)
			}
			if st, out := call(t, "DELETE", nodes[1].url+"/device/delete/move-a-"+kind, key, nil); st != http.StatusOK {
				t.Fatalf("delete A: %d %v", st, out)
			}
			s := b.nextSend(clusterWait)
			if s == nil || s.ID != taken {
				t.Fatalf("B got %+v after A's deletion, want %s", s, taken)
			}
			b.report(taken)
		})
	}
}

// clusterNumber is the company's one WhatsApp number as node s lists it.
func clusterNumber(t *testing.T, s *server, key string) (online bool, fingerprint string) {
	t.Helper()
	_, body := get(t, s.url+"/whatsapp/numbers", key)
	var wa struct {
		Numbers []struct {
			Online            bool   `json:"online"`
			DeviceFingerprint string `json:"device_fingerprint"`
		}
	}
	if err := json.Unmarshal(body, &wa); err != nil || len(wa.Numbers) != 1 {
		t.Fatalf("the numbers: %s", body)
	}
	return wa.Numbers[0].Online, wa.Numbers[0].DeviceFingerprint
}

// clusterLetGo: agent A, linked to node a with the number, links again to
// node b announcing none: the number is held by nobody (PROTOCOL.md
// section 16.1), shown offline on node c while A is linked; a send made
// there waits queued and does not reach A; B, announcing the number on
// node a, gets it.
func clusterLetGo(t *testing.T, nodes []*server, key string, tokenA, tokenB string) {
	t.Helper()
	poll.Within(t, clusterWait, "the number online on A", func() bool {
		online, fp := clusterNumber(t, nodes[2], key)
		return online && fp == "move-a-let-go"
	})
	again := linkAgent(t, nodes[1], tokenA)
	poll.Within(t, clusterWait, "the number offline while A is linked without it", func() bool {
		online, fp := clusterNumber(t, nodes[2], key)
		return !online && fp == "move-a-let-go"
	})
	waiting := whatsAppSend(t, nodes[2], key, "waits for an agent")
	if s := again.nextSend(2 * time.Second); s != nil {
		t.Fatalf("A, linked without the number, got %s", s.ID)
	}
	if got := whatsAppStatus(t, nodes[0], key, waiting); got != "queued" {
		t.Fatalf("the send to the number held by nobody: %s, want queued", got)
	}
	b := linkAgent(t, nodes[0], tokenB, clusterMoveNumber)
	if s := b.nextSend(clusterWait); s == nil || s.ID != waiting {
		t.Fatalf("B, announcing the number, got %+v, want %s", s, waiting)
	}
	b.report(waiting)
}
