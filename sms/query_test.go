package sms_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// A conversation stored under a national sender as the phone reported it,
// while the company had no region, is listed under that form; once the
// company chooses a region in which the form reads as a number, the form
// the list shows still opens the conversation, and the number's own
// E.164 form opens the number's.
func TestHistoryListedBeforeRegion(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	dev := activeDevice(t, st, c.ID)
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), time.Now)
	ctx := context.Background()
	if _, err := svc.Inbound(ctx, dev, proto.Inbound{ClientID: "in-1", Channel: "sms", From: "07911123456", Message: "before"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateCompany(c.ID, func(c *store.Company) error { c.Region = "GB"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Inbound(ctx, dev, proto.Inbound{ClientID: "in-2", Channel: "sms", From: "07911123456", Message: "after"}); err != nil {
		t.Fatal(err)
	}
	convs, err := svc.Conversations(ctx, c.ID, dev.Fingerprint, sms.MaxConversations)
	if err != nil || len(convs) != 2 {
		t.Fatalf("conversations: %v, %v; want two", convs, err)
	}
	for _, tc := range []struct{ phone, want string }{{"07911123456", "before"}, {"+447911123456", "after"}, {"07911 123456", "after"}} {
		pg, err := svc.History(ctx, c.ID, dev.Fingerprint, tc.phone, 1, 10)
		if err != nil || pg.Total != 1 || pg.Messages[0].Text != tc.want {
			t.Errorf("history of %q: %+v, %v; want the one message %q", tc.phone, pg, err, tc.want)
		}
	}
	if _, err := svc.History(ctx, c.ID, "no-such-device", "07911123456", 1, 10); err == nil {
		t.Error("history of another device: got no error, want not_found")
	} else if pe, ok := problem.As(err); !ok || pe.Code != problem.NotFound {
		t.Errorf("history of another device: got %v, want not_found", err)
	}
}

// failingHistory is the store with its history reads failing as a store
// that cannot answer does.
type failingHistory struct {
	sms.Store
}

func (failingHistory) History(uint64, string, string, int, int) ([]store.Message, int, error) {
	return nil, 0, store.ErrUnavailable
}

// A history asked under a number that is no E.164 number (07911123456
// without a region) is looked up as
// written (a sender a phone reported so); a store that cannot answer that
// look is the store's failure (503), not the number's 400, which told the
// client to change a number that may well be listed.
func TestHistoryAsWrittenKeepsTheStoresFailure(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	dev := activeDevice(t, st, c.ID)
	svc := sms.New(sms.Config{}, failingHistory{st}, slog.New(slog.DiscardHandler), time.Now)
	_, err := svc.History(context.Background(), c.ID, dev.Fingerprint, "07911123456", 1, 10)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("history of 07911123456 with the store out of reach: got %v, want the store's ErrUnavailable", err)
	}
}
