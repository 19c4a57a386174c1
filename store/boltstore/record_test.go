package boltstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// filled sets every field of the struct v points to to a value of its own,
// so that a field the compact encoding leaves out (one added to the type
// later, say) fails the round trip.
func filled(t testing.TB, v any) {
	t.Helper()
	fillStruct(t, reflect.ValueOf(v).Elem())
}

func fillStruct(t testing.TB, rv reflect.Value) {
	t.Helper()
	for i := range rv.NumField() {
		f := rv.Field(i)
		if rv.Type().Field(i).Tag.Get("json") == "-" {
			continue // not stored
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString(fmt.Sprintf("%s-é-%d", rv.Type().Field(i).Name, i))
		case reflect.Uint64:
			f.SetUint(uint64(1)<<(i%64) + uint64(i))
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(1000*i + 7))
		case reflect.Pointer:
			if f.Type().Elem().Kind() != reflect.Struct {
				t.Fatalf("%s.%s is a %s: teach the compact encoding and this test about it", rv.Type(), rv.Type().Field(i).Name, f.Type())
			}
			f.Set(reflect.New(f.Type().Elem()))
			fillStruct(t, f.Elem())
		case reflect.Slice:
			if k := f.Type().Elem().Kind(); k == reflect.String {
				f.Set(reflect.ValueOf([]string{"a-é", "", "c"}).Convert(f.Type()))
				continue
			} else if k != reflect.Struct {
				t.Fatalf("%s.%s is a %s: teach the compact encoding and this test about it", rv.Type(), rv.Type().Field(i).Name, f.Type())
			}
			f.Set(reflect.MakeSlice(f.Type(), 2, 2))
			for j := range 2 {
				fillStruct(t, f.Index(j))
			}
		default:
			if f.Type() != reflect.TypeFor[time.Time]() {
				t.Fatalf("%s.%s is a %s: teach the compact encoding and this test about it", rv.Type(), rv.Type().Field(i).Name, f.Type())
			}
			f.Set(reflect.ValueOf(time.Date(2026, 11, 26, 10, i, 3, 123456789+i, time.UTC)))
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	var m Message
	filled(t, &m)
	var c Conversation
	filled(t, &c)
	var a Activity
	filled(t, &a)
	for _, tc := range []struct {
		in, out any
	}{
		{&m, new(Message)}, {&c, new(Conversation)}, {&a, new(Activity)},
		{&Message{}, new(Message)}, {&Conversation{}, new(Conversation)}, {&Activity{}, new(Activity)},
		{&Message{ID: 1, CreatedAt: time.Unix(0, 0).UTC(), Segments: -1}, new(Message)},
	} {
		raw, err := encodeRecord(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if raw[0] == '{' {
			t.Fatalf("%T is stored as JSON: %s", tc.in, raw)
		}
		if err := decodeRecord(raw, tc.out); err != nil {
			t.Fatalf("%T: %v", tc.in, err)
		}
		if !reflect.DeepEqual(tc.out, tc.in) {
			t.Fatalf("round trip of %T:\n got %+v\nwant %+v", tc.in, tc.out, tc.in)
		}
		// Every cut short or lengthened record is refused, never misread.
		for n := 1; n < len(raw); n++ {
			if err := decodeRecord(raw[:n], tc.out); err == nil {
				t.Fatalf("%T cut to %d of %d bytes read without an error", tc.in, n, len(raw))
			}
		}
		if err := decodeRecord(append(raw[:len(raw):len(raw)], 0), tc.out); err == nil {
			t.Fatalf("%T with a byte more read without an error", tc.in)
		}
	}
	raw, _ := encodeRecord(m)
	if company, err := messageCompany(raw); err != nil || company != m.CompanyID {
		t.Fatalf("messageCompany: %d, %v; want %d", company, err, m.CompanyID)
	}
	if err := decodeRecord(raw, new(Conversation)); err == nil {
		t.Fatal("a message's record read as a conversation")
	}
}

// rawRecord is the stored bytes of key in bucket.
func rawRecord(t *testing.T, s *Store, bucket, key []byte) []byte {
	t.Helper()
	var raw []byte
	if err := s.db.View(func(tx *bolt.Tx) error {
		raw = append(raw, tx.Bucket(bucket).Get(key)...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if raw == nil {
		t.Fatalf("no record %x in %s", key, bucket)
	}
	return raw
}

// A send writes its message and its conversation in the compact encoding,
// well under the size of their JSON.
func TestSendsAreStoredCompact(t *testing.T) {
	t.Parallel()
	s, _, msgs, _ := foldFixture(t, 1)
	m := msgs[0]
	for _, r := range []struct {
		bucket, key []byte
		v           any
	}{
		{bucketMessages, itob(m.ID), m},
		{bucketConversations, convKey(m.CompanyID, m.DeviceID, m.Phone), Conversation{Phone: m.Phone, LastMessage: m.Text, LastMessageAt: m.CreatedAt, Direction: m.Direction, MessageCount: 1, LastID: m.ID}},
	} {
		raw := rawRecord(t, s, r.bucket, r.key)
		js, err := json.Marshal(r.v)
		if err != nil {
			t.Fatal(err)
		}
		if raw[0] == '{' || 2*len(raw) > len(js) {
			t.Fatalf("%s record of %d bytes (%q), want the compact encoding, under half its JSON's %d", r.bucket, len(raw), raw, len(js))
		}
	}
}

// A store written before schema 7 holds messages and conversations as
// JSON: they read as before, and a status change writes the record anew
// in the compact encoding.
func TestJSONRecordsOfEarlierStoresRead(t *testing.T) {
	t.Parallel()
	s, d, msgs, t0 := foldFixture(t, 2)
	m := msgs[0]
	ck := convKey(m.CompanyID, m.DeviceID, m.Phone)
	conv := Conversation{Phone: m.Phone, LastMessage: m.Text, LastMessageAt: m.CreatedAt, Direction: Outbound, MessageCount: 1, LastID: m.ID}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for _, r := range []struct {
			bucket, key []byte
			v           any
		}{{bucketMessages, itob(m.ID), m}, {bucketConversations, ck, conv}} {
			js, err := json.Marshal(r.v)
			if err != nil {
				return err
			}
			if err := tx.Bucket(r.bucket).Put(r.key, js); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.MessageByUUID(m.CompanyID, m.UUID); err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("message from JSON: %+v (%v), want %+v", got, err, m)
	}
	if convs, err := s.ConversationsAfter(m.CompanyID, m.DeviceID, "", 10); err != nil || len(convs) != 2 || convs[0] != conv {
		t.Fatalf("conversations: %+v (%v), want %+v first of 2", convs, err, conv)
	}
	export, _, _, err := s.CompanyMessagesAfter(m.CompanyID, 0, 10)
	if err != nil || len(export) != 2 || !reflect.DeepEqual(export[0], m) {
		t.Fatalf("export: %+v (%v), want %+v first of 2", export, err, m)
	}
	pending, err := s.Pending(m.CompanyID, d.ID, 0, 10, t0, nil)
	if err != nil || len(pending) != 2 || pending[0].UUID != m.UUID {
		t.Fatalf("pending: %+v (%v)", pending, err)
	}
	moved, _, err := s.Transition(m.CompanyID, d.ID, m.UUID, MsgSending, "", "", t0.Add(time.Second))
	if err != nil || moved.Status != MsgSending || moved.Text != m.Text {
		t.Fatalf("transition: %+v (%v)", moved, err)
	}
	if raw := rawRecord(t, s, bucketMessages, itob(m.ID)); raw[0] != tagMessage {
		t.Fatalf("the record after a status change: %q, want the compact encoding", raw)
	}
}

// A report's activity event is written compact; one written as JSON by
// an earlier store reads as before.
func TestActivityStoredCompact(t *testing.T) {
	t.Parallel()
	s, d, msgs, t0 := foldFixture(t, 1)
	m := msgs[0]
	for _, status := range []string{MsgSending, MsgSent} {
		if _, _, err := s.Transition(m.CompanyID, d.ID, m.UUID, status, "", "", t0); err != nil {
			t.Fatal(err)
		}
	}
	slot := pair(m.CompanyID, 0)
	if raw := rawRecord(t, s, bucketActivity, slot); raw[0] != tagActivity {
		t.Fatalf("the activity event of a report: %q, want the compact encoding", raw)
	}
	summary, err := s.DashboardSummary(m.CompanyID, t0.AddDate(0, 0, -1), t0.AddDate(0, 0, 1), 10)
	if err != nil || len(summary.Recent) != 1 || summary.Recent[0].Type != ActMessageSent {
		t.Fatalf("recent activity: %+v (%v), want the sent event", summary.Recent, err)
	}
	old := Activity{Type: ActMessageSent, At: t0, Description: "SMS to +1555… sent via an earlier build"}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		js, err := json.Marshal(old)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketActivity).Put(slot, js)
	}); err != nil {
		t.Fatal(err)
	}
	summary, err = s.DashboardSummary(m.CompanyID, t0.AddDate(0, 0, -1), t0.AddDate(0, 0, 1), 10)
	if err != nil || len(summary.Recent) != 1 || summary.Recent[0] != old {
		t.Fatalf("recent activity from JSON: %+v (%v), want %+v", summary.Recent, err, old)
	}
}

// Records of other types stay JSON whatever JSON value they hold: a list
// starts with '[', not a tag, and reads back as JSON.
func TestJSONRecordsOfAnyShapeRead(t *testing.T) {
	t.Parallel()
	for _, in := range []any{[]int{1, 2}, "text", 42, map[string]int{"a": 1}} {
		raw, err := encodeRecord(in)
		if err != nil {
			t.Fatal(err)
		}
		out := reflect.New(reflect.TypeOf(in))
		if err := decodeRecord(raw, out.Interface()); err != nil || !reflect.DeepEqual(out.Elem().Interface(), in) {
			t.Fatalf("%T %v stored as %q read back as %v (%v)", in, in, raw, out.Elem().Interface(), err)
		}
	}
}
