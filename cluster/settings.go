package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultSettingsEvery is how often a node says its settings on the bus. A
// node that joins hears every other node's at once (each answers a
// newcomer), so the period only bounds how late a node that missed a
// message (its bus was down) learns the others'.
const DefaultSettingsEvery = 10 * time.Second

const topicSettings = "peers.settings"

// Digest is how a secret or a long value is said on the bus: a short
// HMAC-SHA256 of it under key, enough to tell two values apart, never the
// value. Empty stays empty (unset). key is a secret the nodes share in
// their database (DigestSecret) and that the bus never carries: a plain
// hash of a value a person chose (an --admin-token typed rather than
// generated) could be guessed back offline by whoever reads the bus, which
// may be more parties than those who read the database; keyed, a digest
// tells them nothing. Every node computes the same digest of the same
// value, as it reads the same key.
func Digest(key []byte, v string) string {
	if v == "" {
		return ""
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(v))
	return "hmac-sha256:" + hex.EncodeToString(h.Sum(nil)[:8])
}

// DigestSecret names the store secret (store.Backend.Secret) that keys
// Digest, and DigestSecretSize is its size in bytes.
const (
	DigestSecret     = "settings-digest"
	DigestSecretSize = 32
)

// settingsMessage is what a node says on topicSettings.
type settingsMessage struct {
	Node     string            `json:"node"`
	Settings map[string]string `json:"settings"`
	// Ask is set by a node that has not heard this node yet: it answers
	// with its own at once.
	Ask bool `json:"ask,omitempty"`
}

// Settings compares the settings every node of a cluster must share (the
// same limits, plans, secrets and public URL: docs/cluster.md, "What each
// node needs") with what the other nodes say on the bus. A node started
// with another --rate-general, without --stripe-key or with another
// webhook secret serves like the others but answers differently: a
// company signed up through it gets another default plan, Stripe's
// events sent to it fail their signature. Nothing refuses it (the nodes
// run already, and which one is right is the operator's call), so each
// node logs a WARN naming the other node and the settings that differ
// (never their values) when it first hears it so, and an INFO once they
// agree again; /metrics counts such nodes (Differ).
type Settings struct {
	bus   *Bus
	own   map[string]string
	every time.Duration
	now   func() time.Time
	log   *slog.Logger

	reply *pacedReply // answers newcomers and asks

	mu     sync.Mutex
	others map[string]otherSettings // node -> what differs; guarded by mu
}

// otherSettings is what one other node said last.
type otherSettings struct {
	differ string // names of the settings that differ, comma-separated; "" when all agree
	heard  time.Time
}

// NewSettings starts listening to the other nodes' settings; Run says
// this node's. own maps each setting's flag name to its value as this node
// runs with it (Digest for a secret or a long value). every is the period
// (DefaultSettingsEvery when 0).
func NewSettings(b *Bus, own map[string]string, every time.Duration, log *slog.Logger) (*Settings, error) {
	if every <= 0 {
		every = DefaultSettingsEvery
	}
	s := &Settings{bus: b, own: own, every: every, now: time.Now, log: log, others: map[string]otherSettings{}}
	s.reply = newPacedReply(replyEvery, func() { s.say(false) })
	if err := b.Subscribe(topicSettings, s.heard); err != nil {
		return nil, fmt.Errorf("cluster: settings: %w", err)
	}
	return s, nil
}

// Run says this node's settings every period until ctx ends; its first
// message asks every node for theirs.
func (s *Settings) Run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	s.say(true)
	for {
		select {
		case <-ctx.Done():
			s.reply.stop()
			return
		case <-t.C:
			s.say(false)
			s.Differ() // forgets the nodes gone quiet, whether or not /metrics is read
		}
	}
}

func (s *Settings) say(ask bool) {
	data, err := json.Marshal(settingsMessage{Node: s.bus.Node(), Settings: s.own, Ask: ask})
	if err != nil { // a map of strings always marshals
		s.log.Error("settings: marshal", "err", err)
		return
	}
	s.bus.Publish(topicSettings, data)
}

// heard compares one node's settings with this node's and logs a change.
func (s *Settings) heard(m Message) {
	var msg settingsMessage
	if err := json.Unmarshal(m.Data, &msg); err != nil || msg.Node == "" {
		s.log.Warn("settings: a message that is not a node's settings", "err", err)
		return
	}
	if msg.Node == s.bus.Node() || !validNodeName(msg.Node) {
		return
	}
	differ := strings.Join(differing(s.own, msg.Settings), ", ")
	now := s.now()
	s.mu.Lock()
	before, known := s.others[msg.Node]
	if !known && len(s.others) >= MaxPeers {
		// As the census (Peers): a flood of forged names on the bus does
		// not grow the map past MaxPeers; stale names make room.
		s.forgetLocked(now)
		if len(s.others) >= MaxPeers {
			s.mu.Unlock()
			return
		}
	}
	s.others[msg.Node] = otherSettings{differ: differ, heard: now}
	s.mu.Unlock()
	if msg.Ask || !known {
		// A newcomer learns this node's at once, not a period later
		// (pacedReply: a flood of them is not echoed name for name).
		s.reply.ask()
	}
	switch {
	case differ != "" && (differ != before.differ || msg.Ask):
		// msg.Ask: the node just started, and is judged afresh, whatever
		// its previous run said.
		s.log.Warn("a node runs with other settings than this one: every node of a cluster needs the same (docs/cluster.md, Three nodes on one machine); a client is answered differently by each",
			"other", msg.Node, "settings", differ)
	case differ == "" && before.differ != "":
		s.log.Info("a node's settings agree with this one's again", "other", msg.Node)
	}
}

// differing names the settings both sides have whose values differ,
// sorted. A setting only one side has is left out: a node of another
// build may have other settings, which the version check reports.
func differing(own, other map[string]string) []string {
	var out []string
	for k, v := range own {
		if o, ok := other[k]; ok && o != v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Differ counts the nodes heard within three periods whose settings differ
// from this node's, and forgets the nodes not heard for longer.
func (s *Settings) Differ() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(s.now())
	n := 0
	for _, o := range s.others {
		if o.differ != "" {
			n++
		}
	}
	return n
}

// forgetLocked forgets the nodes not heard within three periods.
func (s *Settings) forgetLocked(now time.Time) {
	cutoff := now.Add(-3 * s.every)
	for name, o := range s.others {
		if o.heard.Before(cutoff) {
			delete(s.others, name)
		}
	}
}
