package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go"
)

// Ask publishes data on topic to the other nodes and waits until every
// node named in want has answered (Answer), or ctx ends. It returns the
// nodes of want that did not answer: none when all did. A node that
// answers but is not in want (it joined meanwhile) is fine too.
//
// This is how a change that other nodes cache is made "at once": the
// changing node acts locally, asks, and answers its client only when
// every live node confirmed it dropped what it held.
//
// Ask returns when ctx ends even while the client's lock is held (a
// reconnection's handshake with a silent server holds it for the connect
// timeout); its question then goes on by itself until the lock is free.
func (b *Bus) Ask(ctx context.Context, topic string, data []byte, want []string) (missing []string, err error) {
	type result struct {
		missing []string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		m, err := b.ask(ctx, topic, data, want)
		done <- result{m, err}
	}()
	select {
	case r := <-done:
		return r.missing, r.err
	case <-ctx.Done():
		return slices.Clone(want), fmt.Errorf("bus: ask %s: %d of %d nodes did not answer: %w", topic, len(want), len(want), ctx.Err())
	}
}

func (b *Bus) ask(ctx context.Context, topic string, data []byte, want []string) (missing []string, err error) {
	missing = slices.Clone(want)
	if len(missing) == 0 {
		return nil, nil
	}
	inbox := b.nc.NewRespInbox()
	sub, err := b.nc.SubscribeSync(inbox)
	if err != nil {
		return missing, fmt.Errorf("bus: ask %s: %w", topic, err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // the inbox is this call's alone
	if err := b.nc.PublishMsg(&nats.Msg{Subject: b.prefix + "." + topic, Reply: inbox, Data: data}); err != nil {
		return missing, fmt.Errorf("bus: ask %s: %w", topic, err)
	}
	for len(missing) > 0 {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return missing, fmt.Errorf("bus: ask %s: %d of %d nodes did not answer: %w", topic, len(missing), len(want), err)
		}
		missing = slices.DeleteFunc(missing, func(n string) bool { return n == string(m.Data) })
	}
	return nil, nil
}

// Answer calls fn with every Ask of topic from another node, and answers
// with this node's name once fn returns nil. A failing fn answers nothing:
// the asker counts this node as not having confirmed. fn runs on the
// subscription's goroutine and must not block long.
func (b *Bus) Answer(topic string, fn func(Message) error) error {
	strip := len(b.prefix) + 1
	_, err := b.nc.Subscribe(b.prefix+"."+topic, func(m *nats.Msg) {
		if !b.enter() {
			return // closing: unanswered, the asker counts this node as gone
		}
		defer b.handlers.Done()
		if err := fn(Message{Topic: m.Subject[strip:], Data: m.Data}); err != nil {
			b.log.Warn("bus: a question was not answered", "topic", m.Subject[strip:], "err", err)
			return
		}
		if m.Reply != "" {
			if err := m.Respond([]byte(b.node)); err != nil {
				b.log.Warn("bus: answer dropped", "topic", m.Subject[strip:], "err", err)
			}
		}
	})
	if err != nil {
		return fmt.Errorf("bus: answer %s: %w", topic, err)
	}
	return nil
}
