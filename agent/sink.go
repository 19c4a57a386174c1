package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
	"unicode/utf8"

	proto "github.com/simrelay/simrelay/android-protocol"
)

// maxInboundRunes is PROTOCOL.md 10.2's limit of an inbound text.
const maxInboundRunes = 10000

// sink is the agent's side of Transport.Receive.
type sink struct{ a *Agent }

func (s sink) Mark(key string) (string, error) { return s.a.j.Mark(key) }

// Take turns received messages into inbound frames and journals them
// before anything is sent: the outbox of PROTOCOL.md 10.2.
func (s sink) Take(msgs []Received, markKey, markValue string) error {
	frames := make([]proto.Inbound, 0, len(msgs))
	keys := make([]string, 0, len(msgs))
	refs := make([][]string, 0, len(msgs))
	files := make([][]spooled, 0, len(msgs))
	// Files spooled for a take that is not journaled are no one's: the
	// transport hands the messages in again, and they are spooled anew.
	unspool := func() {
		for _, sp := range files {
			inboundRecord{Files: sp}.removeSpooled()
		}
	}
	for _, m := range msgs {
		f := s.a.frame(m)
		frames = append(frames, f)
		keys = append(keys, m.Key)
		refs = append(refs, m.Ref)
		sp, err := s.a.spool(f.ClientID, m.Media)
		files = append(files, sp)
		if err != nil {
			unspool()
			return err
		}
	}
	added, err := s.a.j.takeInbound(frames, keys, refs, files, markKey, markValue)
	if err != nil {
		unspool()
		return err
	}
	for _, f := range added {
		s.a.log.Info("message received", "client_id", f.ClientID, "channel", f.Channel, "sim_slot", f.SIMSlot)
	}
	if len(added) > 0 {
		wake(s.a.pumpWake)
		wake(s.a.mediaWake)
	}
	return nil
}

// Seen says what the journal knows of the message with the transport's key.
func (s sink) Seen(key string) (Seen, error) { return s.a.j.seenInbound(s.a.clientID(key)) }

// Deliver settles the awaiting job whose transport reference is ref.
func (s sink) Deliver(ref string, d Delivery) error {
	if !d.Final || ref == "" {
		return nil
	}
	jobs, err := s.a.j.InState(StateAwaiting)
	if err != nil {
		return err
	}
	for _, job := range jobs {
		if job.Ref == ref {
			s.a.log.Info("job "+d.Status, "id", job.ID, "error", d.Error, "detail", d.Detail)
			return s.a.finish(job.ID, Outcome{Status: d.Status, Error: d.Error, Detail: d.Detail})
		}
	}
	if d.Detail == "" || d.Status != proto.StatusDelivered {
		return nil
	}
	added, err := s.a.j.AddDetail(ref, d.Detail, stamp(time.Now()))
	if err != nil {
		return err
	}
	if added {
		s.a.log.Info("job "+d.Detail, "ref", ref)
		wake(s.a.pumpWake)
	}
	return nil
}

// frame makes the inbound frame of a received message: a client_id of the
// install's salt and the transport's key (hashed when that would pass 128
// bytes), the text cut to 10,000 characters (logged), the slot for SMS only.
func (a *Agent) frame(m Received) proto.Inbound {
	id := a.clientID(m.Key)
	text := m.Text
	if utf8.RuneCountInString(text) > maxInboundRunes {
		a.log.Warn("received text cut to 10,000 characters", "client_id", id, "characters", utf8.RuneCountInString(text))
		text = string([]rune(text)[:maxInboundRunes])
	}
	ch := m.Channel
	if ch == "" {
		ch = proto.ChannelSMS
	}
	at := m.At
	if at.IsZero() {
		at = time.Now()
	}
	f := proto.Inbound{ClientID: id, Channel: ch, From: m.From, Message: text, ReceivedAt: stamp(at)}
	if ch == proto.ChannelSMS {
		f.SIMSlot = m.SIMSlot
		if f.SIMSlot == "" {
			f.SIMSlot = proto.SIM1
		}
	} else {
		f.To = m.To
	}
	return f
}

// clientID is the client_id of the message with the transport's key: the
// install's salt and the key, hashed when that would pass 128 bytes.
func (a *Agent) clientID(key string) string {
	id := a.opt.Config.Salt + ":" + key
	if len(id) > proto.MaxClientIDBytes {
		sum := sha256.Sum256([]byte(key))
		id = a.opt.Config.Salt + ":h:" + hex.EncodeToString(sum[:20])
	}
	return id
}
