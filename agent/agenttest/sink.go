// Package agenttest holds what the tests of the agent's transports share.
package agenttest

import "github.com/simrelay/simrelay/agent"

// Sink is an agent.Sink in memory: it keeps the messages it was given, in
// order, and the marks stored with them.
type Sink struct {
	Marks map[string]string
	Took  []agent.Received
}

// Take keeps msgs, and the mark k=v when k is set.
func (s *Sink) Take(msgs []agent.Received, k, v string) error {
	s.Took = append(s.Took, msgs...)
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

// Deliver takes a delivery report and keeps nothing of it.
func (s *Sink) Deliver(string, agent.Delivery) error { return nil }
