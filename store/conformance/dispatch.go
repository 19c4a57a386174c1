package conformance

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/window"
)

// DispatchStore is what the dispatch suite calls: the phone link's read of
// its queue and its reports, inbound messages and the reads of the
// exchange, with the sends and the few writes its fixtures need.
type DispatchStore interface {
	Base
	Enqueue(m *store.Message, idemKey store.IdempotencyKey, now func() time.Time, check store.DeviceCheck, answer func(store.Message) (int, []byte)) (store.Message, *store.Idempotent, error)
	Cancel(companyID uint64, uuid string, now time.Time) (store.Message, error)
	ExpireQueued(now time.Time, limit int) ([]store.Message, error)
	ReleaseDue(now time.Time, limit int) ([]store.Message, error)
	MessageByUUID(companyID uint64, uuid string) (store.Message, error)
	AddOptOut(companyID uint64, phone string, now time.Time) (o store.OptOut, created bool, err error)
	OptOuts(companyID uint64, after string, limit int) ([]store.OptOut, error)
	DeleteDevice(companyID uint64, fingerprint string, now time.Time) (store.Device, error)
	UpdateWebhookSet(companyID uint64, now time.Time, fn func(*store.WebhookSet) error) (store.WebhookSet, error)
	SetStatusEvents(h store.StatusEvents)

	Pending(companyID, deviceID uint64, after uint64, limit int, now time.Time, moved func([]store.Message)) ([]store.Message, error)
	QueueDepth(companyID, deviceID uint64) (int, error)
	Transition(companyID, deviceID uint64, uuid, status, errText, statusAt string, now time.Time) (store.Message, bool, error)
	TransitionLater(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) store.Transit
	TransitionDetail(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) (store.Message, bool, error)
	MessageSequence() (uint64, error)
	StoreInbound(m *store.Message, now func() time.Time) (store.Message, bool, error)
	InboundList(q store.InboundQuery) ([]store.Message, error)
	History(companyID uint64, device, phone string, page, limit int) ([]store.Message, int, error)
	Conversations(companyID uint64, device string, limit int) ([]store.Conversation, error)
	ConversationsAfter(companyID, deviceID uint64, after string, limit int) ([]store.Conversation, error)
	CompanyMessagesAfter(companyID, after uint64, limit int) (msgs []store.Message, next uint64, done bool, err error)
	LastMessageID() (uint64, error)
}

// Dispatch runs the suite of the device queue, the phones' reports and
// inbound messages.
func Dispatch(t *testing.T, open Opener[DispatchStore]) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, DispatchStore)
	}{
		{"QueueInOrder", dispatchQueueInOrder},
		{"PriorityFirst", dispatchPriorityFirst},
		{"LateCommitNotSkipped", dispatchLateCommitNotSkipped},
		{"ConcurrentSendsOnce", dispatchConcurrentSendsOnce},
		{"OptedOutFailedAtDispatch", dispatchOptedOutFailed},
		{"HeldOutsideWindow", dispatchHeldOutsideWindow},
		{"MessageSequence", dispatchMessageSequence},
		{"Transitions", dispatchTransitions},
		{"ReportsInOrder", dispatchReportsInOrder},
		{"StatusEvents", dispatchStatusEvents},
		{"Inbound", dispatchInbound},
		{"InboundRepeatsRace", dispatchInboundRace},
		{"OptOutKeywords", dispatchOptOutKeywords},
		{"InboundList", dispatchInboundList},
		{"History", dispatchHistory},
		{"Conversations", dispatchConversations},
		{"ConversationsBoundedByText", dispatchConversationsBoundedByText},
		{"CompanyMessagesAfter", dispatchCompanyMessagesAfter},
		{"ExportPagesBoundedByText", dispatchExportPagesBoundedByText},
	} {
		t.Run(c.name, func(t *testing.T) { t.Parallel(); c.run(t, open(t)) })
	}
}

// dispatchClock is the fixtures' clock: T0.
func dispatchClock() time.Time { return T0 }

// dispatchSend queues an SMS on the device as the API does, with what edit
// sets on the message, and returns it as stored.
func dispatchSend(t testing.TB, s DispatchStore, d store.Device, phone, text string, edit func(*store.Message)) store.Message {
	t.Helper()
	m := store.Message{UUID: fmt.Sprintf("u-%d", unique()), CompanyID: d.CompanyID, Device: d.Fingerprint, Channel: "sms",
		Phone: phone, Text: text, SIMSlot: "SIM1", Segments: 1}
	if edit != nil {
		edit(&m)
	}
	out, _, err := s.Enqueue(&m, store.IdempotencyKey{}, dispatchClock, nil, nil)
	if err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
	return out
}

// dispatchReceive stores an inbound SMS the device received from phone.
func dispatchReceive(t testing.TB, s DispatchStore, d store.Device, phone, text, clientID string, at time.Time) store.Message {
	t.Helper()
	m := store.Message{UUID: fmt.Sprintf("in-%d", unique()), CompanyID: d.CompanyID, DeviceID: d.ID, Channel: "sms",
		Phone: phone, Text: text, SIMSlot: "SIM1", Segments: 1, ClientID: clientID}
	out, _, err := s.StoreInbound(&m, func() time.Time { return at })
	if err != nil {
		t.Fatalf("inbound %q: %v", text, err)
	}
	return out
}

// dispatchSettled is Pending that waits, when it returned jobs failed or
// held at dispatch, until moved hears of them: what a link's next read
// sees. It returns what moved heard too.
func dispatchSettled(t testing.TB, s DispatchStore, d store.Device, after uint64, limit int, now time.Time) (jobs, moved []store.Message) {
	t.Helper()
	told := make(chan []store.Message, 1)
	jobs, err := s.Pending(d.CompanyID, d.ID, after, limit, now, func(ms []store.Message) { told <- ms })
	if err != nil {
		t.Fatalf("pending: %v", err)
	}
	if slices.ContainsFunc(jobs, func(m store.Message) bool { return m.Status != store.MsgQueued || !m.HeldUntil.IsZero() }) {
		select {
		case moved = <-told:
		case <-time.After(10 * time.Second):
			t.Fatal("the jobs failed or held at dispatch were never committed")
		}
	}
	return jobs, moved
}

// dispatchTexts are the texts of the messages, in order.
func dispatchTexts(ms []store.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return out
}

// dispatchQueueInOrder: the plain queue comes in place order from after the
// cursor, limit at a time; acked, scheduled and canceled jobs are not
// pending; QueueDepth counts what waits. Another device, another company's
// ids, and a deleted device have nothing pending, and no error.
func dispatchQueueInOrder(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	other := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	b, _ := Company(t, s)
	n1 := dispatchSend(t, s, d, "+15551230001", "n1", nil)
	n2 := dispatchSend(t, s, d, "+15551230002", "n2", nil)
	dispatchSend(t, s, d, "+15551230003", "later", func(m *store.Message) { m.SendAt = T0.Add(time.Hour) })
	n3 := dispatchSend(t, s, d, "+15551230003", "n3", nil)
	dispatchSend(t, s, d, "+15551230004", "n4", nil)
	dispatchSend(t, s, other, "+15551230005", "elsewhere", nil)
	if n, err := s.QueueDepth(c.ID, d.ID); err != nil || n != 4 {
		t.Fatalf("queue depth: %d (%v), want 4", n, err)
	}

	first, _ := dispatchSettled(t, s, d, 0, 2, T0)
	if got := dispatchTexts(first); !slices.Equal(got, []string{"n1", "n2"}) {
		t.Fatalf("first read, limit 2: %v, want n1 n2", got)
	}
	if first[0].ID != n1.ID || first[0].QueuePlace() == 0 || first[1].QueuePlace() <= first[0].QueuePlace() {
		t.Fatalf("first read: places %d, %d; want rising places", first[0].QueuePlace(), first[1].QueuePlace())
	}
	if first[0].Status != store.MsgQueued || first[0].UUID != n1.UUID || first[0].Phone != n1.Phone || first[0].SIMSlot != "SIM1" {
		t.Fatalf("first job: %+v, want the queued send as stored", first[0])
	}
	cursor := first[1].QueuePlace()
	if _, _, err := s.Transition(c.ID, d.ID, n2.UUID, store.MsgSending, "", "", T0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(c.ID, n3.UUID, T0); err != nil {
		t.Fatal(err)
	}
	rest, _ := dispatchSettled(t, s, d, cursor, 10, T0)
	if got := dispatchTexts(rest); !slices.Equal(got, []string{"n4"}) {
		t.Fatalf("after the cursor: %v, want n4 (n3 canceled)", got)
	}
	if again, _ := dispatchSettled(t, s, d, 0, 10, T0); !slices.Equal(dispatchTexts(again), []string{"n1", "n4"}) {
		t.Fatalf("from the head: %v, want n1 n4 (n2 acked, n3 canceled)", dispatchTexts(again))
	}
	if n, err := s.QueueDepth(c.ID, d.ID); err != nil || n != 2 {
		t.Fatalf("queue depth after an ack and a cancel: %d (%v), want 2", n, err)
	}
	if n, err := s.QueueDepth(b.ID, d.ID); err != nil || n != 0 {
		t.Fatalf("queue depth asked by another company: %d (%v), want 0", n, err)
	}
	if jobs, err := s.Pending(b.ID, d.ID, 0, 10, T0, nil); err != nil || len(jobs) != 0 {
		t.Fatalf("pending asked by another company: %v (%v), want none", dispatchTexts(jobs), err)
	}
	if jobs, _ := dispatchSettled(t, s, other, 0, 10, T0); !slices.Equal(dispatchTexts(jobs), []string{"elsewhere"}) {
		t.Fatalf("the other device's queue: %v", dispatchTexts(jobs))
	}
	if _, err := s.DeleteDevice(c.ID, d.Fingerprint, T0); err != nil {
		t.Fatal(err)
	}
	if jobs, err := s.Pending(c.ID, d.ID, 0, 10, T0, nil); err != nil || len(jobs) != 0 {
		t.Fatalf("pending of a deleted device: %v (%v), want none", dispatchTexts(jobs), err)
	}
	if n, err := s.QueueDepth(c.ID, d.ID); err != nil || n != 0 {
		t.Fatalf("queue depth of a deleted device: %d (%v), want 0", n, err)
	}
}

// dispatchPriorityFirst: priority jobs come first, highest first and in
// order within a priority, whatever the link's cursor in the plain queue;
// they leave the priority queue when canceled or acked, and an expired one
// is left out for the sweeper.
func dispatchPriorityFirst(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	later := T0.Add(time.Hour)
	send := func(text string, priority int, expires time.Time) store.Message {
		return dispatchSend(t, s, d, "+15551234567", text, func(m *store.Message) { m.Priority, m.ExpiresAt = priority, expires })
	}
	send("n1", 0, later)
	send("n2", 0, later)
	send("n3", 0, later)
	first, _ := dispatchSettled(t, s, d, 0, 1, T0)
	cursor := first[0].QueuePlace() // a link took n1
	p3 := send("p3", 3, later)
	send("p3b", 3, later)
	p7 := send("p7", 7, later)
	send("gone", 9, T0.Add(time.Minute))
	if got, _ := dispatchSettled(t, s, d, cursor, 10, T0.Add(time.Minute)); !slices.Equal(dispatchTexts(got), []string{"p7", "p3", "p3b", "n2", "n3"}) {
		t.Fatalf("pending: %v, want p7 p3 p3b n2 n3", dispatchTexts(got))
	}
	if got, _ := dispatchSettled(t, s, d, cursor, 2, T0); !slices.Equal(dispatchTexts(got), []string{"gone", "p7"}) {
		t.Fatalf("pending, limit 2: %v, want gone p7", dispatchTexts(got))
	}
	if _, err := s.Cancel(c.ID, p3.UUID, T0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Transition(c.ID, d.ID, p7.UUID, store.MsgSending, "", "", T0); err != nil {
		t.Fatal(err)
	}
	if got, _ := dispatchSettled(t, s, d, cursor, 10, T0.Add(time.Minute)); !slices.Equal(dispatchTexts(got), []string{"p3b", "n2", "n3"}) {
		t.Fatalf("after a cancel and an ack: %v, want p3b n2 n3", dispatchTexts(got))
	}
}

// dispatchLateCommitNotSkipped: a send that commits after a later send
// (its transaction began first and took longer) is still found by a link
// whose cursor moved past the later one: the queue's places follow commit
// order, whatever order the message ids were drawn in.
func dispatchLateCommitNotSkipped(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	inTx, release := make(chan struct{}, 1), make(chan struct{})
	slowDone, fastDone := make(chan error, 1), make(chan error, 1)
	slow := store.Message{UUID: fmt.Sprintf("u-%d", unique()), CompanyID: c.ID, Device: d.Fingerprint, Channel: "sms", Phone: "+15551230001", Text: "slow", SIMSlot: "SIM1"}
	fast := store.Message{UUID: fmt.Sprintf("u-%d", unique()), CompanyID: c.ID, Device: d.Fingerprint, Channel: "sms", Phone: "+15551230002", Text: "fast", SIMSlot: "SIM1"}
	go func() {
		// The answer is built inside the send's transaction, once the
		// message has its id: the transaction stays open until release
		// (or a while, where the backend lets nothing else commit meanwhile).
		_, _, err := s.Enqueue(&slow, store.IdempotencyKey{Key: "slow", Route: "/test", Digest: "d"}, dispatchClock, nil, func(store.Message) (int, []byte) {
			select {
			case inTx <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-time.After(300 * time.Millisecond):
			}
			return 202, []byte("{}")
		})
		slowDone <- err
	}()
	<-inTx
	go func() {
		_, _, err := s.Enqueue(&fast, store.IdempotencyKey{}, dispatchClock, nil, nil)
		fastDone <- err
	}()
	var seen []store.Message
	cursor := uint64(0)
	select {
	case err := <-fastDone:
		// The later send committed first: a link reads it now.
		if err != nil {
			t.Fatal(err)
		}
		jobs, _ := dispatchSettled(t, s, d, 0, 10, T0)
		seen = append(seen, jobs...)
		for _, j := range jobs {
			cursor = max(cursor, j.QueuePlace())
		}
		fastDone <- nil
	case <-time.After(150 * time.Millisecond): // it waits for the first one to commit
	}
	close(release)
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
	if err := <-fastDone; err != nil {
		t.Fatal(err)
	}
	jobs, _ := dispatchSettled(t, s, d, cursor, 10, T0)
	seen = append(seen, jobs...)
	if got := dispatchTexts(seen); len(got) != 2 || !slices.Contains(got, "slow") || !slices.Contains(got, "fast") {
		t.Fatalf("the link read %v, want slow and fast once each", got)
	}
}

// dispatchConcurrentSendsOnce: a link reading its queue while sends commit
// concurrently gets every job exactly once, in rising places.
func dispatchConcurrentSendsOnce(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	const senders, each = 4, 10
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			for j := range each {
				m := store.Message{UUID: fmt.Sprintf("u-%d", unique()), CompanyID: c.ID, Device: d.Fingerprint, Channel: "sms",
					Phone: "+15551230001", Text: fmt.Sprintf("%d-%d", i, j), SIMSlot: "SIM1"}
				if _, _, err := s.Enqueue(&m, store.IdempotencyKey{}, dispatchClock, nil, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	sendsDone := make(chan struct{})
	go func() { wg.Wait(); close(sendsDone) }()
	seen := map[string]int{}
	cursor := uint64(0)
	for finished := false; ; {
		select {
		case <-sendsDone:
			finished = true // this read finds every commit
		default:
		}
		jobs, _ := dispatchSettled(t, s, d, cursor, 7, T0)
		for _, j := range jobs {
			if j.QueuePlace() <= cursor {
				t.Fatalf("job %s at place %d after the cursor %d", j.Text, j.QueuePlace(), cursor)
			}
			cursor = j.QueuePlace()
			seen[j.Text]++
		}
		if finished && len(jobs) == 0 {
			break
		}
		if len(jobs) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if len(seen) != senders*each {
		t.Fatalf("the link read %d of %d jobs", len(seen), senders*each)
	}
	for text, n := range seen {
		if n != 1 {
			t.Fatalf("job %s read %d times", text, n)
		}
	}
}

// dispatchOptedOutFailed: a job whose number opted out while it waited
// comes back from Pending as it is about to be (failed,
// recipient_opted_out, never to be sent) in its place, so the cursor
// moves past it; the failure is written after, moved hears of it, and it
// is pending no more. Jobs to other numbers, and other channels, pass.
func dispatchOptedOutFailed(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	stopped := dispatchSend(t, s, d, "+15551230001", "stopped", nil)
	kept := dispatchSend(t, s, d, "+15551230002", "kept", nil)
	if _, _, err := s.AddOptOut(c.ID, stopped.Phone, T0); err != nil {
		t.Fatal(err)
	}
	jobs, moved := dispatchSettled(t, s, d, 0, 10, T0)
	if len(jobs) != 2 {
		t.Fatalf("pending: %v, want both jobs", dispatchTexts(jobs))
	}
	if g := jobs[0]; g.ID != stopped.ID || g.Status != store.MsgFailed || g.Error != "recipient_opted_out" {
		t.Fatalf("the opted-out job came back %s %q, want failed recipient_opted_out", g.Status, g.Error)
	}
	if g := jobs[1]; g.ID != kept.ID || g.Status != store.MsgQueued {
		t.Fatalf("the other job came back %s, want queued", g.Status)
	}
	if len(moved) != 1 || moved[0].ID != stopped.ID || moved[0].Status != store.MsgFailed || moved[0].Error != "recipient_opted_out" {
		t.Fatalf("moved heard %+v, want the opted-out job failed", moved)
	}
	if m, err := s.MessageByUUID(c.ID, stopped.UUID); err != nil || m.Status != store.MsgFailed || m.Error != "recipient_opted_out" {
		t.Fatalf("stored %s %q (%v), want failed recipient_opted_out", m.Status, m.Error, err)
	}
	if again, _ := dispatchSettled(t, s, d, 0, 10, T0); len(again) != 1 || again[0].ID != kept.ID {
		t.Fatalf("pending after the commit: %v, want only kept", dispatchTexts(again))
	}
	if n, _ := s.QueueDepth(c.ID, d.ID); n != 1 {
		t.Fatalf("queue depth: %d, want 1", n)
	}
}

// dispatchHeldOutsideWindow: a job a link reaches outside its window comes
// back held (HeldUntil the next opening, still queued, not to be sent) in
// its place; the hold is written after, moved hears of it, and the job
// leaves the queue until the scheduler queues it again. A job inside its
// window goes out.
func dispatchHeldOutsideWindow(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	opens := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC) // T0 is a Thursday: the next Monday
	closed := &window.Window{Days: []string{"mon"}, From: "09:00", To: "10:00", TimeZone: "UTC"}
	open := &window.Window{Days: []string{"thu"}, From: "09:00", To: "17:00", TimeZone: "UTC"}
	held := dispatchSend(t, s, d, "+15551230001", "held", func(m *store.Message) { m.Window, m.ExpiresAt = closed, opens.Add(time.Hour) })
	now := dispatchSend(t, s, d, "+15551230002", "now", func(m *store.Message) { m.Window = open })
	jobs, moved := dispatchSettled(t, s, d, 0, 10, T0)
	if len(jobs) != 2 || jobs[0].ID != held.ID || jobs[1].ID != now.ID {
		t.Fatalf("pending: %v, want held then now", dispatchTexts(jobs))
	}
	if g := jobs[0]; g.Status != store.MsgQueued || !g.HeldUntil.Equal(opens) {
		t.Fatalf("outside its window: %s held until %v, want queued held until %v", g.Status, g.HeldUntil, opens)
	}
	if g := jobs[1]; g.Status != store.MsgQueued || !g.HeldUntil.IsZero() {
		t.Fatalf("inside its window: %s held until %v, want queued, not held", g.Status, g.HeldUntil)
	}
	if len(moved) != 1 || moved[0].ID != held.ID || !moved[0].HeldUntil.Equal(opens) {
		t.Fatalf("moved heard %+v, want the held job", moved)
	}
	if m, err := s.MessageByUUID(c.ID, held.UUID); err != nil || m.Status != store.MsgQueued || !m.HeldUntil.Equal(opens) || !m.ExpiresAt.Equal(opens.Add(time.Hour)) {
		t.Fatalf("stored %s held until %v expires %v (%v), want queued, held until the opening, its expiry kept", m.Status, m.HeldUntil, m.ExpiresAt, err)
	}
	if again, _ := dispatchSettled(t, s, d, 0, 10, T0); len(again) != 1 || again[0].ID != now.ID {
		t.Fatalf("pending after the hold: %v, want only now (held jobs leave the queue)", dispatchTexts(again))
	}
}

// dispatchMessageSequence: every queue place handed out, on any device, is
// at or below MessageSequence, and a send after it is placed above it.
func dispatchMessageSequence(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	a := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	b := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	var sent []store.Message
	for i := range 5 {
		sent = append(sent, dispatchSend(t, s, a, "+15551230001", fmt.Sprintf("a%d", i), nil))
	}
	sent = append(sent, dispatchSend(t, s, b, "+15551230001", "b0", nil))
	seq, err := s.MessageSequence()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sent {
		if m.QueuePlace() > seq {
			t.Fatalf("message %s placed at %d, above the sequence %d", m.Text, m.QueuePlace(), seq)
		}
	}
	for _, d := range []store.Device{a, b} {
		m := dispatchSend(t, s, d, "+15551230001", "after", nil)
		if m.QueuePlace() <= seq {
			t.Fatalf("a send after the sequence %d was placed at %d on %s", seq, m.QueuePlace(), d.Fingerprint)
		}
	}
}

// dispatchTransitions: the phone's acks and reports move an outbound job
// forwards only; repeats and late news change nothing and are no error;
// delivered and failed are final. Another company's, another device's, an
// inbound message's, an unknown or a deleted device's job is ErrNotFound.
func dispatchTransitions(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	other := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	b, _ := Company(t, s)
	step := func(m store.Message, status, errText, statusAt string, at time.Time, want string, wantMoved bool) store.Message {
		t.Helper()
		got, moved, err := s.Transition(c.ID, d.ID, m.UUID, status, errText, statusAt, at)
		if err != nil || got.Status != want || moved != wantMoved {
			t.Fatalf("%s to %s: got %s moved %v (%v), want %s moved %v", m.Text, status, got.Status, moved, err, want, wantMoved)
		}
		return got
	}
	m := dispatchSend(t, s, d, "+15551230001", "m", nil)
	got := step(m, store.MsgSending, "", "", T0.Add(time.Second), store.MsgSending, true)
	if !got.UpdatedAt.Equal(T0.Add(time.Second)) || got.ID != m.ID || got.Text != "m" {
		t.Fatalf("after the ack: %+v", got)
	}
	step(m, store.MsgSending, "", "", T0, store.MsgSending, false)
	got = step(m, store.MsgSent, "", "2026-11-19T10:00:02.000Z", T0.Add(2*time.Second), store.MsgSent, true)
	if got.StatusAt != "2026-11-19T10:00:02.000Z" {
		t.Fatalf("status_at: %q", got.StatusAt)
	}
	step(m, store.MsgSending, "", "", T0, store.MsgSent, false) // a late ack
	step(m, store.MsgSent, "", "", T0, store.MsgSent, false)    // a repeat
	step(m, store.MsgDelivered, "", "", T0.Add(3*time.Second), store.MsgDelivered, true)
	step(m, store.MsgFailed, "late", "", T0, store.MsgDelivered, false) // delivered is final
	if stored, err := s.MessageByUUID(c.ID, m.UUID); err != nil || stored.Status != store.MsgDelivered || stored.StatusAt != "2026-11-19T10:00:02.000Z" || !stored.UpdatedAt.Equal(T0.Add(3*time.Second)) {
		t.Fatalf("stored: %+v (%v), want delivered at 10:00:03, status_at of the sent report", stored, err)
	}

	f := dispatchSend(t, s, d, "+15551230002", "f", nil)
	got = step(f, store.MsgFailed, "radio_off", "", T0, store.MsgFailed, true) // a failure before any ack
	if got.Error != "radio_off" {
		t.Fatalf("failed: error %q, want radio_off", got.Error)
	}
	step(f, store.MsgDelivered, "", "", T0, store.MsgFailed, false) // failed is final
	if jobs, _ := dispatchSettled(t, s, d, 0, 10, T0); len(jobs) != 0 {
		t.Fatalf("pending after the reports: %v, want none", dispatchTexts(jobs))
	}

	// An expired or canceled job ignores a late ack; an outcome still counts, and clears the expiry's note.
	e := dispatchSend(t, s, d, "+15551230003", "e", func(m *store.Message) { m.ExpiresAt = T0.Add(time.Minute) })
	if expired, err := s.ExpireQueued(T0.Add(2*time.Minute), 10); err != nil || len(expired) != 1 || expired[0].ID != e.ID {
		t.Fatalf("expire: %v (%v)", dispatchTexts(expired), err)
	}
	step(e, store.MsgSending, "", "", T0, store.MsgExpired, false)
	if got := step(e, store.MsgSent, "", "", T0.Add(3*time.Minute), store.MsgSent, true); got.Error != "" {
		t.Fatalf("sent after expiry: error %q, want none", got.Error)
	}
	x := dispatchSend(t, s, d, "+15551230004", "x", nil)
	if _, err := s.Cancel(c.ID, x.UUID, T0); err != nil {
		t.Fatal(err)
	}
	step(x, store.MsgSending, "", "", T0, store.MsgCanceled, false)
	// A scheduled job no phone was given changes with no report.
	sch := dispatchSend(t, s, d, "+15551230005", "sch", func(m *store.Message) { m.SendAt = T0.Add(time.Hour) })
	step(sch, store.MsgSent, "", "", T0, store.MsgScheduled, false)

	// Detail is an agent channel's: an SMS keeps none.
	sd := dispatchSend(t, s, d, "+15551230006", "sd", nil)
	if got, moved, err := s.TransitionDetail(c.ID, d.ID, sd.UUID, store.MsgDelivered, "", "", store.DetailRead, T0); err != nil || !moved || got.Status != store.MsgDelivered || got.Detail != "" {
		t.Fatalf("an SMS delivered with a detail: %s detail %q moved %v (%v), want delivered, no detail", got.Status, got.Detail, moved, err)
	}
	if _, moved, err := s.TransitionDetail(c.ID, d.ID, sd.UUID, store.MsgDelivered, "", "", store.DetailPlayed, T0); err != nil || moved {
		t.Fatalf("an SMS's later detail: moved %v (%v), want nothing", moved, err)
	}

	n := dispatchSend(t, s, d, "+15551230007", "n", nil)
	in := dispatchReceive(t, s, d, "+15551230007", "hi", "c1", T0)
	for _, tc := range []struct {
		name                string
		companyID, deviceID uint64
		uuid                string
	}{
		{"another company", b.ID, d.ID, n.UUID},
		{"another device", c.ID, other.ID, n.UUID},
		{"an unknown job", c.ID, d.ID, "no-such-job"},
		{"an inbound message", c.ID, d.ID, in.UUID},
	} {
		if _, _, err := s.Transition(tc.companyID, tc.deviceID, tc.uuid, store.MsgSending, "", "", T0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s: %v, want ErrNotFound", tc.name, err)
		}
	}
	if got, _ := s.MessageByUUID(c.ID, n.UUID); got.Status != store.MsgQueued {
		t.Fatalf("after the refused reports: %s, want queued", got.Status)
	}
	if _, err := s.DeleteDevice(c.ID, d.Fingerprint, T0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Transition(c.ID, d.ID, n.UUID, store.MsgSent, "", "", T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted device's report: %v, want ErrNotFound", err)
	}
}

// dispatchReportsInOrder: changes queued one after another by one goroutine
// (TransitionLater, waited for after) apply in that order, each answering
// as it would alone; a failing one fails alone.
func dispatchReportsInOrder(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	a := dispatchSend(t, s, d, "+15551230001", "a", nil)
	b := dispatchSend(t, s, d, "+15551230002", "b", nil)
	steps := []store.Transit{
		s.TransitionLater(c.ID, d.ID, a.UUID, store.MsgSending, "", "", "", T0),
		s.TransitionLater(c.ID, d.ID, b.UUID, store.MsgSending, "", "", "", T0),
		s.TransitionLater(c.ID, d.ID, a.UUID, store.MsgSent, "", "t1", "", T0.Add(time.Second)),
		s.TransitionLater(c.ID, d.ID, "no-such-job", store.MsgSent, "", "", "", T0),
		s.TransitionLater(c.ID, d.ID, a.UUID, store.MsgSent, "", "t1", "", T0.Add(time.Second)), // a repeat
		s.TransitionLater(c.ID, d.ID, a.UUID, store.MsgDelivered, "", "t2", "", T0.Add(2*time.Second)),
		s.TransitionLater(c.ID, d.ID, b.UUID, store.MsgFailed, "radio_off", "", "", T0.Add(time.Second)),
	}
	want := []struct {
		status string
		moved  bool
	}{{store.MsgSending, true}, {store.MsgSending, true}, {store.MsgSent, true}, {}, {store.MsgSent, false}, {store.MsgDelivered, true}, {store.MsgFailed, true}}
	for i, st := range steps {
		m, moved, err := st.Wait()
		if i == 3 {
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("change of an unknown job: %v, want ErrNotFound", err)
			}
			continue
		}
		if err != nil || m.Status != want[i].status || moved != want[i].moved {
			t.Fatalf("change %d: got %s moved %v (%v), want %s moved %v", i, m.Status, moved, err, want[i].status, want[i].moved)
		}
	}
	got, err := s.MessageByUUID(c.ID, a.UUID)
	if err != nil || got.Status != store.MsgDelivered || got.StatusAt != "t2" || !got.UpdatedAt.Equal(T0.Add(2*time.Second)) {
		t.Fatalf("a: %+v (%v), want delivered at t2", got, err)
	}
	if got, err := s.MessageByUUID(c.ID, b.UUID); err != nil || got.Status != store.MsgFailed || got.Error != "radio_off" {
		t.Fatalf("b: %s %q (%v), want failed radio_off", got.Status, got.Error, err)
	}
}

// dispatchStatusEvents: each status change a receiver hears of (sent,
// delivered, failed, expired; a job failed at dispatch, at its scheduled
// time, or with its device) builds its
// deliveries in the change's transaction, once, with the message as the
// change left it; acks, repeats and refused reports build none.
func dispatchStatusEvents(t *testing.T, s DispatchStore) {
	var mu sync.Mutex
	var heard []string
	s.SetStatusEvents(store.StatusEvents{
		Build: func(set store.WebhookSet, m store.Message) (store.WebhookEvent, []store.WebhookDelivery, error) {
			ev := store.WebhookEvent{ID: fmt.Sprintf("ev-%d", unique()), Body: []byte(`{"type":"sms.` + m.Status + `"}`)}
			var out []store.WebhookDelivery
			for _, e := range set.Entries {
				out = append(out, store.WebhookDelivery{UUID: fmt.Sprintf("d-%d", unique()), EventType: "sms." + m.Status,
					WebhookID: e.ID, CreatedAt: m.UpdatedAt, NextAttemptAt: m.UpdatedAt})
			}
			return ev, out, nil
		},
		Committed: func(m store.Message, res store.OutboxAdd) {
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, fmt.Sprintf("%s %s %d", m.Text, m.Status, res.Queued))
		},
	})
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	if _, err := s.UpdateWebhookSet(c.ID, T0, func(w *store.WebhookSet) error {
		w.Secret = "whsec_test"
		w.Entries = []store.WebhookEntry{{URL: "https://hooks.example.com/a", Active: true}, {URL: "https://hooks.example.com/b", Active: true}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	a := dispatchSend(t, s, d, "+15551230001", "a", nil)
	f := dispatchSend(t, s, d, "+15551230002", "f", nil)
	dispatchSend(t, s, d, "+15551230003", "e", func(m *store.Message) { m.ExpiresAt = T0.Add(time.Minute) })
	o := dispatchSend(t, s, d, "+15551230004", "o", nil)
	for _, r := range []struct{ uuid, status, errText string }{
		{a.UUID, store.MsgSending, ""}, {a.UUID, store.MsgSent, ""}, {a.UUID, store.MsgSent, ""}, {a.UUID, store.MsgDelivered, ""},
		{f.UUID, store.MsgSending, ""}, {f.UUID, store.MsgFailed, "radio_off"}, {f.UUID, store.MsgDelivered, ""},
	} {
		if _, _, err := s.Transition(c.ID, d.ID, r.uuid, r.status, r.errText, "", T0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Transition(c.ID, d.ID, "no-such-job", store.MsgSent, "", "", T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown job: %v", err)
	}
	if _, err := s.ExpireQueued(T0.Add(2*time.Minute), 10); err != nil {
		t.Fatal(err)
	}
	// A scheduled job to a number that opts out fails at its time.
	dispatchSend(t, s, d, o.Phone, "at its time", func(m *store.Message) { m.SendAt = T0.Add(time.Hour) })
	if _, _, err := s.AddOptOut(c.ID, o.Phone, T0); err != nil {
		t.Fatal(err)
	}
	dispatchSettled(t, s, d, 0, 10, T0)
	if _, err := s.ReleaseDue(T0.Add(time.Hour), 10); err != nil {
		t.Fatal(err)
	}
	// A deleted device's jobs fail with it.
	gone := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	dispatchSend(t, s, gone, "+15551230005", "with its device", nil)
	if _, err := s.DeleteDevice(c.ID, gone.Fingerprint, T0); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"a sent 2", "a delivered 2", "f failed 2", "e expired 2", "o failed 2", "at its time failed 2", "with its device failed 2"}
	if !slices.Equal(heard, want) {
		t.Fatalf("events committed: %q, want %q", heard, want)
	}
}

// dispatchInbound: a message a phone received is stored once per device
// and client id: a repeat answers the first one, dup true. It is the
// device's registration's, stamped received at the store's time; another
// device's client ids are its own. A deleted or another company's device
// is ErrDeviceGone.
func dispatchInbound(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	other := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	b, _ := Company(t, s)
	in := func(dev store.Device, companyID uint64, clientID, text string, at time.Time) (store.Message, bool, error) {
		m := store.Message{UUID: fmt.Sprintf("in-%d", unique()), CompanyID: companyID, DeviceID: dev.ID, Channel: "sms",
			Phone: "+15557650001", Text: text, SIMSlot: "SIM2", Segments: 1, ClientID: clientID, ReceivedAt: "2026-11-19T09:59:59.000Z"}
		return s.StoreInbound(&m, func() time.Time { return at })
	}
	first, dup, err := in(d, c.ID, "c1", "hello", T0)
	if err != nil || dup || first.ID == 0 {
		t.Fatalf("first: %+v dup %v (%v)", first, dup, err)
	}
	if first.Direction != store.Inbound || first.Status != store.MsgReceived || first.CompanyID != c.ID || first.DeviceID != d.ID ||
		first.Device != d.Fingerprint || !first.CreatedAt.Equal(T0) || first.Text != "hello" || first.SIMSlot != "SIM2" || first.ReceivedAt != "2026-11-19T09:59:59.000Z" {
		t.Fatalf("stored: %+v", first)
	}
	again, dup, err := in(d, c.ID, "c1", "hello again", T0.Add(time.Minute))
	if err != nil || !dup || again.ID != first.ID || again.UUID != first.UUID || again.Text != "hello" {
		t.Fatalf("a repeat: %+v dup %v (%v), want the first message, dup", again, dup, err)
	}
	elsewhere, dup, err := in(other, c.ID, "c1", "hello", T0)
	if err != nil || dup || elsewhere.ID == first.ID || elsewhere.DeviceID != other.ID {
		t.Fatalf("the same client id from another device: %+v dup %v (%v), want a new message", elsewhere, dup, err)
	}
	if msgs, err := s.InboundList(store.InboundQuery{CompanyID: c.ID, Limit: 10}); err != nil || len(msgs) != 2 {
		t.Fatalf("inbound list: %d (%v), want 2", len(msgs), err)
	}
	if _, _, err := in(d, b.ID, "c2", "forged", T0); !errors.Is(err, store.ErrDeviceGone) {
		t.Fatalf("another company's device: %v, want ErrDeviceGone", err)
	}
	if _, err := s.DeleteDevice(c.ID, d.Fingerprint, T0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := in(d, c.ID, "c3", "late", T0); !errors.Is(err, store.ErrDeviceGone) {
		t.Fatalf("a deleted device: %v, want ErrDeviceGone", err)
	}
	// The handset paired again is a new registration: its client ids start afresh.
	again2 := Device(t, s, c.ID, d.Fingerprint)
	if m, dup, err := in(again2, c.ID, "c1", "new", T0); err != nil || dup || m.ID == first.ID {
		t.Fatalf("client id c1 on the new registration: %+v dup %v (%v), want a new message", m, dup, err)
	}
}

// dispatchInboundRace: repeats of one message that arrive at once (a phone
// that resends before its ack) store it once; every other answers it, dup.
func dispatchInboundRace(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	const n = 6
	var wg sync.WaitGroup
	ids, dups, errs := make([]uint64, n), make([]bool, n), make([]error, n)
	for i := range n {
		wg.Go(func() {
			m := store.Message{UUID: fmt.Sprintf("in-%d", unique()), CompanyID: c.ID, DeviceID: d.ID, Channel: "sms",
				Phone: "+15557650001", Text: "hi", SIMSlot: "SIM1", ClientID: "c1"}
			var out store.Message
			out, dups[i], errs[i] = s.StoreInbound(&m, dispatchClock)
			ids[i] = out.ID
		})
	}
	wg.Wait()
	stored := 0
	for i := range n {
		if errs[i] != nil || ids[i] == 0 || ids[i] != ids[0] {
			t.Fatalf("repeat %d: id %d (%v), want every repeat to answer id %d", i, ids[i], errs[i], ids[0])
		}
		if !dups[i] {
			stored++
		}
	}
	if stored != 1 {
		t.Fatalf("%d repeats stored the message, want 1", stored)
	}
	if msgs, _ := s.InboundList(store.InboundQuery{CompanyID: c.ID, Limit: 10}); len(msgs) != 1 {
		t.Fatalf("%d messages stored, want 1", len(msgs))
	}
}

// dispatchOptOutKeywords: an inbound SMS that is a stop keyword (the whole
// text, trimmed of white space and invisible characters, its ASCII letters in any case) puts its sender on the company's list, named as
// sends name it; a start keyword takes it off; other texts change nothing.
func dispatchOptOutKeywords(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	b, _ := Company(t, s)
	list := func(companyID uint64) []string {
		t.Helper()
		os, err := s.OptOuts(companyID, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, o := range os {
			out = append(out, o.Phone)
		}
		return out
	}
	dispatchReceive(t, s, d, "15557650001", "  stop ", "c1", T0)
	dispatchReceive(t, s, d, "+15557650002", "please stop", "c2", T0)
	dispatchReceive(t, s, d, "+15557650003", "\u200bUnsubscribe\ufeff", "c3", T0)
	if got := list(c.ID); !slices.Equal(got, []string{"+15557650001", "+15557650003"}) {
		t.Fatalf("opt-outs: %v, want +15557650001 and +15557650003", got)
	}
	if got := list(b.ID); len(got) != 0 {
		t.Fatalf("another company's opt-outs: %v, want none", got)
	}
	os, _ := s.OptOuts(c.ID, "", 1)
	if len(os) != 1 || os[0].Source != store.OptOutKeyword || !os[0].CreatedAt.Equal(T0) {
		t.Fatalf("the entry: %+v, want source keyword at T0", os)
	}
	dispatchReceive(t, s, d, "+15557650001", "START", "c4", T0)
	if got := list(c.ID); !slices.Equal(got, []string{"+15557650003"}) {
		t.Fatalf("after START: %v, want +15557650003", got)
	}
	// Only ASCII letters fold: the long s and the dotless i upper-case to
	// S and I in Unicode, and the dotted capital İ lower-cases to i, but
	// no carrier reads "ſtop", "quıt", "QUİT" or "ſtart" as a keyword, nor
	// the full-width "ＳＴＯＰ".
	dispatchReceive(t, s, d, "+15557650004", "ſtop", "c5", T0)
	dispatchReceive(t, s, d, "+15557650005", "quıt", "c6", T0)
	dispatchReceive(t, s, d, "+15557650006", "QUİT", "c8", T0)
	dispatchReceive(t, s, d, "+15557650007", "ＳＴＯＰ", "c9", T0)
	dispatchReceive(t, s, d, "+15557650003", "ſtart", "c7", T0)
	if got := list(c.ID); !slices.Equal(got, []string{"+15557650003"}) {
		t.Fatalf("after texts that fold to keywords only in Unicode: %v, want +15557650003 alone", got)
	}
	if _, _, err := s.Enqueue(&store.Message{UUID: fmt.Sprintf("u-%d", unique()), CompanyID: c.ID, Device: d.Fingerprint, Channel: "sms", Phone: "+15557650003", Text: "x", SIMSlot: "SIM1"},
		store.IdempotencyKey{}, dispatchClock, nil, nil); !errors.As(err, new(*store.OptOutError)) {
		t.Fatalf("a send to the stopped number: %v, want an OptOutError", err)
	}
}

// dispatchInboundList: the newest inbound messages first, up to the limit,
// filtered by the company's live device (its registration's only) and SIM
// slot; outbound and other companies' messages are never listed. A device
// filter naming an unknown or another company's fingerprint is
// ErrDeviceGone.
func dispatchInboundList(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	other := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	b, _ := Company(t, s)
	bd := Device(t, s, b.ID, fmt.Sprintf("fp-%d", unique()))
	receive := func(dev store.Device, slot, text string) {
		m := store.Message{UUID: fmt.Sprintf("in-%d", unique()), CompanyID: dev.CompanyID, DeviceID: dev.ID, Channel: "sms",
			Phone: "+15557650001", Text: text, SIMSlot: slot, ClientID: text}
		if _, _, err := s.StoreInbound(&m, dispatchClock); err != nil {
			t.Fatal(err)
		}
	}
	receive(d, "SIM1", "d1")
	receive(other, "SIM1", "o1")
	receive(d, "SIM2", "d2")
	dispatchSend(t, s, d, "+15557650001", "out", nil)
	receive(d, "SIM1", "d3")
	receive(bd, "SIM1", "b1")
	for _, tc := range []struct {
		q    store.InboundQuery
		want []string
	}{
		{store.InboundQuery{CompanyID: c.ID, Limit: 10}, []string{"d3", "d2", "o1", "d1"}},
		{store.InboundQuery{CompanyID: c.ID, Limit: 2}, []string{"d3", "d2"}},
		{store.InboundQuery{CompanyID: c.ID, Limit: 0}, []string{}},
		{store.InboundQuery{CompanyID: c.ID, Limit: -1}, []string{}},
		{store.InboundQuery{CompanyID: c.ID, Device: d.Fingerprint, SIMSlot: "SIM1", Limit: 0}, []string{}},
		{store.InboundQuery{CompanyID: c.ID, SIMSlot: "SIM1", Limit: 10}, []string{"d3", "o1", "d1"}},
		{store.InboundQuery{CompanyID: c.ID, Device: d.Fingerprint, Limit: 10}, []string{"d3", "d2", "d1"}},
		{store.InboundQuery{CompanyID: c.ID, Device: d.Fingerprint, SIMSlot: "SIM2", Limit: 10}, []string{"d2"}},
		{store.InboundQuery{CompanyID: c.ID, Device: d.Fingerprint, SIMSlot: "SIM3", Limit: 10}, []string{}},
		{store.InboundQuery{CompanyID: b.ID, Limit: 10}, []string{"b1"}},
	} {
		got, err := s.InboundList(tc.q)
		if err != nil || !slices.Equal(dispatchTexts(got), tc.want) {
			t.Fatalf("%+v: %v (%v), want %v", tc.q, dispatchTexts(got), err, tc.want)
		}
	}
	for _, fp := range []string{bd.Fingerprint, "no-such-device"} {
		if _, err := s.InboundList(store.InboundQuery{CompanyID: c.ID, Device: fp, Limit: 10}); !errors.Is(err, store.ErrDeviceGone) {
			t.Fatalf("device %s: %v, want ErrDeviceGone", fp, err)
		}
	}
	// The handset paired again: the new registration's list starts empty.
	if _, err := s.DeleteDevice(c.ID, d.Fingerprint, T0); err != nil {
		t.Fatal(err)
	}
	Device(t, s, c.ID, d.Fingerprint)
	if got, err := s.InboundList(store.InboundQuery{CompanyID: c.ID, Device: d.Fingerprint, Limit: 10}); err != nil || len(got) != 0 {
		t.Fatalf("the new registration: %v (%v), want none", dispatchTexts(got), err)
	}
}

// dispatchHistory: one page of a live device's exchange with a number,
// newest first, both ways, with the conversation's total; a page past the
// end is empty. The registration's only: the handset paired again starts
// afresh. An unknown or another company's fingerprint is ErrDeviceGone.
func dispatchHistory(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	other := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	b, _ := Company(t, s)
	bd := Device(t, s, b.ID, fmt.Sprintf("fp-%d", unique()))
	const phone = "+15557650001"
	dispatchSend(t, s, d, phone, "m1", nil)
	dispatchReceive(t, s, d, phone, "m2", "c1", T0)
	dispatchSend(t, s, d, "+15557650002", "elsewhere", nil)
	dispatchSend(t, s, other, phone, "other device", nil)
	dispatchSend(t, s, d, phone, "m3", nil)
	dispatchReceive(t, s, d, phone, "m4", "c2", T0)
	dispatchSend(t, s, d, phone, "m5", nil)
	for _, tc := range []struct {
		page, limit int
		want        []string
	}{
		{1, 10, []string{"m5", "m4", "m3", "m2", "m1"}},
		{1, 2, []string{"m5", "m4"}},
		{2, 2, []string{"m3", "m2"}},
		{3, 2, []string{"m1"}},
		{4, 2, []string{}},
		{1 << 30, 2, []string{}},
	} {
		got, total, err := s.History(c.ID, d.Fingerprint, phone, tc.page, tc.limit)
		if err != nil || total != 5 || !slices.Equal(dispatchTexts(got), tc.want) {
			t.Fatalf("page %d of %d: %v total %d (%v), want %v total 5", tc.page, tc.limit, dispatchTexts(got), total, err, tc.want)
		}
	}
	if got, _, _ := s.History(c.ID, d.Fingerprint, phone, 1, 10); got[1].Direction != store.Inbound || got[0].Direction != store.Outbound {
		t.Fatalf("directions: %s, %s", got[0].Direction, got[1].Direction)
	}
	if got, total, err := s.History(c.ID, d.Fingerprint, "+15557659999", 1, 10); err != nil || total != 0 || len(got) != 0 {
		t.Fatalf("a number never written to: %v total %d (%v), want nothing", dispatchTexts(got), total, err)
	}
	for _, fp := range []string{bd.Fingerprint, "no-such-device"} {
		if _, _, err := s.History(c.ID, fp, phone, 1, 10); !errors.Is(err, store.ErrDeviceGone) {
			t.Fatalf("device %s: %v, want ErrDeviceGone", fp, err)
		}
	}
	if _, err := s.DeleteDevice(c.ID, d.Fingerprint, T0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.History(c.ID, d.Fingerprint, phone, 1, 10); !errors.Is(err, store.ErrDeviceGone) {
		t.Fatalf("a deleted device: %v, want ErrDeviceGone", err)
	}
	again := Device(t, s, c.ID, d.Fingerprint)
	dispatchSend(t, s, again, phone, "new", nil)
	if got, total, err := s.History(c.ID, d.Fingerprint, phone, 1, 10); err != nil || total != 1 || !slices.Equal(dispatchTexts(got), []string{"new"}) {
		t.Fatalf("the new registration: %v total %d (%v), want only new", dispatchTexts(got), total, err)
	}
}

// dispatchConversationsBoundedByText: a list of conversations ends with
// the one that brings its last messages' text to store.ConversationsText,
// whatever its limit, so that a device whose conversations each end with
// a long inbound text (10,000 characters of four bytes) answers a few
// megabytes, not 1,000 times 40 KB; the limit still applies below it.
func dispatchConversationsBoundedByText(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	text := strings.Repeat("\U0001F600", 10000) // 40,000 bytes
	fit := (store.ConversationsText + len(text) - 1) / len(text)
	for i := range fit + 5 {
		dispatchReceive(t, s, d, fmt.Sprintf("+1555%07d", i), text, fmt.Sprintf("long-%d", i), T0.Add(time.Duration(i)*time.Second))
	}
	for _, limit := range []int{0, 1000} {
		convs, err := s.Conversations(c.ID, d.Fingerprint, limit)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if len(convs) != fit {
			t.Fatalf("limit %d: %d conversations of %d bytes each, want %d (%d bytes of text)", limit, len(convs), len(text), fit, store.ConversationsText)
		}
		if convs[0].Phone != fmt.Sprintf("+1555%07d", fit+4) || convs[0].LastMessage != text {
			t.Fatalf("limit %d: the first is %s, want the latest, whole", limit, convs[0].Phone)
		}
	}
	if convs, err := s.Conversations(c.ID, d.Fingerprint, 3); err != nil || len(convs) != 3 {
		t.Fatalf("limit 3: %d conversations (%v), want 3", len(convs), err)
	}
}

// dispatchExportPagesBoundedByText: a page of an export's conversations or
// messages ends with the one whose text brings the page to
// store.ExportPageText, whatever its limit, and says so (a conversation
// page is cut at the bound, a message page is not done), so that a device
// whose conversations each end with a long inbound text (10,000 characters
// of four bytes) is read a megabyte at a time, not 500 times 40 KB; paging
// on still reads every one, and the limit applies below the bound.
func dispatchExportPagesBoundedByText(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	text := strings.Repeat("\U0001F600", 10000) // 40,000 bytes
	fit := (store.ExportPageText + len(text) - 1) / len(text)
	all := fit + 5
	var ids []uint64
	for i := range all {
		ids = append(ids, dispatchReceive(t, s, d, fmt.Sprintf("+1555%07d", i), text, fmt.Sprintf("long-%d", i), T0.Add(time.Duration(i)*time.Second)).ID)
	}
	page, err := s.ConversationsAfter(c.ID, d.ID, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != fit || !store.ExportPageFull(page, 500) {
		t.Fatalf("a page of %d conversations of %d bytes each (full: %v), want %d (%d bytes of text), full", len(page), len(text), store.ExportPageFull(page, 500), fit, store.ExportPageText)
	}
	seen := len(page)
	for pages := 0; store.ExportPageFull(page, 500); pages++ {
		if pages > all {
			t.Fatal("the conversation pages never end")
		}
		if page, err = s.ConversationsAfter(c.ID, d.ID, page[len(page)-1].Phone, 500); err != nil {
			t.Fatal(err)
		}
		seen += len(page)
	}
	if seen != all {
		t.Fatalf("paged %d conversations, want %d", seen, all)
	}
	if page, err := s.ConversationsAfter(c.ID, d.ID, "", 3); err != nil || len(page) != 3 || !store.ExportPageFull(page, 3) {
		t.Fatalf("limit 3: %d conversations (%v), want 3, full", len(page), err)
	}

	msgs, next, done, err := s.CompanyMessagesAfter(c.ID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != fit || done || next != ids[fit-1] {
		t.Fatalf("a page of %d messages of %d bytes each (done %v, next %d), want %d (%d bytes of text), not done, next %d", len(msgs), len(text), done, next, fit, store.ExportPageText, ids[fit-1])
	}
	got := len(msgs)
	for pages := 0; !done; pages++ {
		if pages > all {
			t.Fatal("the message pages never end")
		}
		if msgs, next, done, err = s.CompanyMessagesAfter(c.ID, next, 500); err != nil {
			t.Fatal(err)
		}
		got += len(msgs)
	}
	if got != all {
		t.Fatalf("paged %d messages, want %d", got, all)
	}
}

// dispatchConversations: a live device's conversations, the latest message
// first, each with its last message, direction, count and last id;
// ConversationsAfter pages them in number order by device id. An unknown
// or another company's fingerprint is ErrDeviceGone.
func dispatchConversations(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	b, _ := Company(t, s)
	bd := Device(t, s, b.ID, fmt.Sprintf("fp-%d", unique()))
	dispatchSend(t, s, d, "+15550000003", "to three", nil)
	dispatchSend(t, s, d, "+15550000001", "to one", nil)
	dispatchSend(t, s, d, "+15550000002", "to two", nil)
	last := dispatchReceive(t, s, d, "+15550000003", "from three", "c1", T0.Add(time.Minute))
	dispatchSend(t, s, bd, "+15550000001", "b's", nil)

	convs, err := s.Conversations(c.ID, d.Fingerprint, 0)
	if err != nil || len(convs) != 3 {
		t.Fatalf("conversations: %+v (%v), want 3", convs, err)
	}
	phones := []string{convs[0].Phone, convs[1].Phone, convs[2].Phone}
	if !slices.Equal(phones, []string{"+15550000003", "+15550000002", "+15550000001"}) {
		t.Fatalf("order: %v, want the latest message first", phones)
	}
	if got := convs[0]; got.LastMessage != "from three" || got.Direction != store.Inbound || got.MessageCount != 2 || got.LastID != last.ID || !got.LastMessageAt.Equal(T0.Add(time.Minute)) {
		t.Fatalf("the latest conversation: %+v", got)
	}
	if got := convs[1]; got.LastMessage != "to two" || got.Direction != store.Outbound || got.MessageCount != 1 {
		t.Fatalf("the second conversation: %+v", got)
	}
	if limited, _ := s.Conversations(c.ID, d.Fingerprint, 1); len(limited) != 1 || limited[0].Phone != "+15550000003" {
		t.Fatalf("limit 1: %+v", limited)
	}
	for _, fp := range []string{bd.Fingerprint, "no-such-device"} {
		if _, err := s.Conversations(c.ID, fp, 10); !errors.Is(err, store.ErrDeviceGone) {
			t.Fatalf("device %s: %v, want ErrDeviceGone", fp, err)
		}
	}

	var paged []string
	after := ""
	for range 5 {
		page, err := s.ConversationsAfter(c.ID, d.ID, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, cv := range page {
			paged = append(paged, cv.Phone)
		}
		after = page[len(page)-1].Phone
	}
	if !slices.Equal(paged, []string{"+15550000001", "+15550000002", "+15550000003"}) {
		t.Fatalf("paged after: %v, want number order", paged)
	}
	if page, err := s.ConversationsAfter(b.ID, d.ID, "", 10); err != nil || len(page) != 0 {
		t.Fatalf("another company's device: %+v (%v), want none", page, err)
	}
}

// dispatchCompanyMessagesAfter: pages of the company's messages, both ways,
// oldest first by id, after the id given; next continues, done ends, and
// another company's messages never come.
func dispatchCompanyMessagesAfter(t *testing.T, s DispatchStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	b, _ := Company(t, s)
	bd := Device(t, s, b.ID, fmt.Sprintf("fp-%d", unique()))
	var want []uint64
	for i := range 7 {
		want = append(want, dispatchSend(t, s, d, "+15550000001", fmt.Sprintf("m%d", i), nil).ID)
		dispatchSend(t, s, bd, "+15550000001", "b's", nil)
		if i%3 == 0 {
			want = append(want, dispatchReceive(t, s, d, "+15550000001", "in", fmt.Sprintf("c%d", i), T0).ID)
		}
	}
	var got []uint64
	next := uint64(0)
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("the pages never end")
		}
		msgs, n, done, err := s.CompanyMessagesAfter(c.ID, next, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) > 3 {
			t.Fatalf("a page of %d, want at most 3", len(msgs))
		}
		for _, m := range msgs {
			if m.CompanyID != c.ID {
				t.Fatalf("message %d of company %d", m.ID, m.CompanyID)
			}
			got = append(got, m.ID)
		}
		if done {
			break
		}
		if n < next {
			t.Fatalf("next went back from %d to %d", next, n)
		}
		next = n
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	if msgs, _, done, err := s.CompanyMessagesAfter(c.ID, want[len(want)-1], 10); err != nil || len(msgs) != 0 || !done {
		t.Fatalf("after the last: %d (%v) done %v, want none, done", len(msgs), err, done)
	}
	// The last message id is of any company: the export's bound.
	if last, err := s.LastMessageID(); err != nil || last < want[len(want)-1] {
		t.Fatalf("last message id %d (%v), want at least %d", last, err, want[len(want)-1])
	}
	m := dispatchSend(t, s, bd, "+15550000001", "b's last", nil)
	if last, err := s.LastMessageID(); err != nil || last != m.ID {
		t.Fatalf("last message id %d (%v), want another company's newest, %d", last, err, m.ID)
	}
}

// DispatchAgentsStore is what the suite of agent channels' reports calls.
type DispatchAgentsStore interface {
	Base
	AnnounceNumbers(companyID, deviceID uint64, channel string, addresses []string, now time.Time, limit int) ([]store.AgentNumber, error)
	EnqueueAgent(m *store.Message, idemKey store.IdempotencyKey, now func() time.Time, vet store.SendVet, answer func(store.Message) (int, []byte)) (store.Message, *store.Idempotent, error)
	AgentNumberByRef(companyID, numberID uint64) (store.AgentNumber, error)
	Transition(companyID, deviceID uint64, uuid, status, errText, statusAt string, now time.Time) (store.Message, bool, error)
	TransitionDetail(companyID, deviceID uint64, uuid, status, errText, statusAt, detail string, now time.Time) (store.Message, bool, error)
	MessageByUUID(companyID uint64, uuid string) (store.Message, error)
}

// DispatchAgents runs the suite of a WhatsApp or iMessage agent's reports.
func DispatchAgents(t *testing.T, open Opener[DispatchAgentsStore]) {
	t.Run("Details", func(t *testing.T) { t.Parallel(); dispatchAgentDetails(t, open(t)) })
	t.Run("NumberMoves", func(t *testing.T) { t.Parallel(); dispatchAgentNumberMoves(t, open(t)) })
}

// dispatchAgentSend queues a WhatsApp message on the number.
func dispatchAgentSend(t *testing.T, s DispatchAgentsStore, n store.AgentNumber, text string) store.Message {
	t.Helper()
	m := store.Message{UUID: fmt.Sprintf("u-%d", unique()), CompanyID: n.CompanyID, Channel: store.ChannelNameWhatsApp, NumberRef: n.PublicID,
		Phone: "+15557654321", Text: text}
	out, _, err := s.EnqueueAgent(&m, store.IdempotencyKey{}, dispatchClock, nil, nil)
	if err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
	return out
}

// dispatchAgentDetails: an agent channel's delivered message keeps the
// receipt's detail, moving it forwards only (played implies read), each
// move a change of its own; the ack of a queued job is noted on its number.
func dispatchAgentDetails(t *testing.T, s DispatchAgentsStore) {
	c, _ := Company(t, s)
	d := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	nums, err := s.AnnounceNumbers(c.ID, d.ID, store.ChannelNameWhatsApp, []string{"+15550001111"}, T0, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := dispatchAgentSend(t, s, nums[0], "hi")
	if _, moved, err := s.Transition(c.ID, d.ID, m.UUID, store.MsgSending, "", "", T0.Add(time.Second)); err != nil || !moved {
		t.Fatalf("ack: moved %v (%v)", moved, err)
	}
	if n, err := s.AgentNumberByRef(c.ID, nums[0].ID); err != nil || !n.LastTakenAt.Equal(T0.Add(time.Second)) {
		t.Fatalf("the number after the ack: last taken %v (%v), want the ack's time", n.LastTakenAt, err)
	}
	for i, step := range []struct {
		status, detail string
		at             time.Time
		want           string
		moved          bool
	}{
		{store.MsgDelivered, store.DetailRead, T0.Add(2 * time.Second), store.DetailRead, true},
		{store.MsgDelivered, store.DetailRead, T0.Add(3 * time.Second), store.DetailRead, false},
		{store.MsgDelivered, store.DetailPlayed, T0.Add(4 * time.Second), store.DetailPlayed, true},
		{store.MsgDelivered, store.DetailRead, T0.Add(5 * time.Second), store.DetailPlayed, false},
		{store.MsgSent, store.DetailRead, T0.Add(6 * time.Second), store.DetailPlayed, false},
	} {
		got, moved, err := s.TransitionDetail(c.ID, d.ID, m.UUID, step.status, "", "", step.detail, step.at)
		if err != nil || got.Status != store.MsgDelivered || got.Detail != step.want || moved != step.moved {
			t.Fatalf("step %d: %s detail %q moved %v (%v), want delivered %q moved %v", i, got.Status, got.Detail, moved, err, step.want, step.moved)
		}
	}
	if got, err := s.MessageByUUID(c.ID, m.UUID); err != nil || got.Detail != store.DetailPlayed || !got.UpdatedAt.Equal(T0.Add(4*time.Second)) {
		t.Fatalf("stored: detail %q updated %v (%v), want played at the fourth second", got.Detail, got.UpdatedAt, err)
	}
}

// dispatchAgentNumberMoves: a job queued while one agent held its number
// may be reported by the agent that holds it now, and is that
// registration's from then on; the former holder's reports, and another
// agent's, are ErrNotFound.
func dispatchAgentNumberMoves(t *testing.T, s DispatchAgentsStore) {
	c, _ := Company(t, s)
	first := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	second := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	stranger := Device(t, s, c.ID, fmt.Sprintf("fp-%d", unique()))
	nums, err := s.AnnounceNumbers(c.ID, first.ID, store.ChannelNameWhatsApp, []string{"+15550001111"}, T0, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := dispatchAgentSend(t, s, nums[0], "hi")
	if m.DeviceID != first.ID {
		t.Fatalf("queued on device %d, want the holder %d", m.DeviceID, first.ID)
	}
	if _, err := s.AnnounceNumbers(c.ID, second.ID, store.ChannelNameWhatsApp, []string{"+15550001111"}, T0, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Transition(c.ID, stranger.ID, m.UUID, store.MsgSending, "", "", T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an agent that never held the number: %v, want ErrNotFound", err)
	}
	got, moved, err := s.Transition(c.ID, second.ID, m.UUID, store.MsgSending, "", "", T0)
	if err != nil || !moved || got.DeviceID != second.ID {
		t.Fatalf("the new holder's ack: device %d moved %v (%v), want device %d", got.DeviceID, moved, err, second.ID)
	}
	if _, _, err := s.Transition(c.ID, first.ID, m.UUID, store.MsgSent, "", "", T0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the former holder's report: %v, want ErrNotFound", err)
	}
	if got, _, err := s.Transition(c.ID, second.ID, m.UUID, store.MsgSent, "", "", T0); err != nil || got.Status != store.MsgSent {
		t.Fatalf("the new holder's report: %s (%v)", got.Status, err)
	}
}
