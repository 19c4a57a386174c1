package sms_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// A STOP whose sender was no number when it came (a national form while
// the company had no region) is listed as the phone reported it. Once the
// company chooses a region that form reads as a number; the entry is still
// removed by the form the list shows, as docs/api.md promises, and a form
// that names neither entry is still 404.
func TestRemoveOptOutListedBeforeRegion(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := storetest.Company(t, st, "Acme", "a@acme.test")
	dev := activeDevice(t, st, c.ID)
	svc := sms.New(sms.Config{}, st, slog.New(slog.DiscardHandler), time.Now)
	ctx := context.Background()
	if _, err := svc.Inbound(ctx, dev, proto.Inbound{ClientID: "stop-1", Channel: "sms", From: "07400123456", Message: "STOP"}); err != nil {
		t.Fatal(err)
	}
	list, err := svc.OptOuts(ctx, c.ID, "", 10)
	if err != nil || len(list) != 1 || list[0].Phone != "07400123456" {
		t.Fatalf("list after the STOP: %v, %v; want the sender as reported", list, err)
	}
	if _, err := st.UpdateCompany(c.ID, func(c *store.Company) error { c.Region = "GB"; return nil }); err != nil {
		t.Fatal(err)
	}
	if pe, ok := problem.As(svc.RemoveOptOut(ctx, c.ID, "07400 123456")); !ok || pe.Code != problem.NotFound {
		t.Fatalf("removing a form that names neither entry: got %v, want not_found", pe)
	}
	if err := svc.RemoveOptOut(ctx, c.ID, "07400123456"); err != nil {
		t.Fatalf("removing the entry as listed: %v", err)
	}
	if list, err := svc.OptOuts(ctx, c.ID, "", 10); err != nil || len(list) != 0 {
		t.Fatalf("list after the remove: %v, %v; want it empty", list, err)
	}
}
