// Package agenttest holds what the tests of the agent's transports share.
package agenttest

import "github.com/simrelay/simrelay/agent"

// Sink is an agent.Sink in memory: it keeps the messages it was given, in
// order, and the marks stored with them. Like the journal it knows the
// keys it took: with Dedup set it skips a message of a known key.
type Sink struct {
	Marks map[string]string
	Took  []agent.Received
	Dedup bool
	seen  map[string]agent.Seen
}

// Take keeps msgs, and the mark k=v when k is set.
func (s *Sink) Take(msgs []agent.Received, k, v string) error {
	if s.seen == nil {
		s.seen = map[string]agent.Seen{}
	}
	for _, m := range msgs {
		if _, known := s.seen[m.Key]; known && s.Dedup {
			continue
		}
		if _, known := s.seen[m.Key]; !known {
			s.seen[m.Key] = agent.SeenHeld
		}
		s.Took = append(s.Took, m)
	}
	if k != "" {
		if s.Marks == nil {
			s.Marks = map[string]string{}
		}
		s.Marks[k] = v
	}
	return nil
}

// Mark is the mark stored under k, "" when none.
func (s *Sink) Mark(k string) (string, error) { return s.Marks[k], nil }

// Seen is what the sink knows of the key.
func (s *Sink) Seen(key string) (agent.Seen, error) { return s.seen[key], nil }

// Clear records that the message of key was acknowledged at the source, as
// the agent does once the transport's Acknowledge returned nil.
func (s *Sink) Clear(key string) {
	if s.seen == nil {
		s.seen = map[string]agent.Seen{}
	}
	s.seen[key] = agent.SeenCleared
}

// Deliver takes a delivery report and keeps nothing of it.
func (s *Sink) Deliver(string, agent.Delivery) error { return nil }
