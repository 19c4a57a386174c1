package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
)

// removalClosingInbound: a message a phone (StoreInbound) or an agent
// (StoreAgentInbound) received, and a file an agent uploads (PutMedia),
// is refused with store.ErrDeviceGone by the write itself once its
// company is marked closing (MarkCompanyClosing), a message new or a
// repeat of one stored before the mark, and nothing of it is stored: the
// link's read of its company (DeviceCompany; an upload's second look at
// its token) comes in a transaction of its own, and a mark between that
// read and the write would otherwise have it stored, acknowledged to the
// phone and then taken by the removal. Another company's devices are not
// touched.
func removalClosingInbound(t *testing.T, s RemovalStore) {
	a, _ := Company(t, s)
	b, _ := Company(t, s)
	n := unique()
	d := Device(t, s, a.ID, fmt.Sprintf("closing-in-%d", n))
	other := Device(t, s, b.ID, fmt.Sprintf("closing-in-other-%d", n))
	nums, err := s.AnnounceNumbers(a.ID, d.ID, store.ChannelNameWhatsApp, []string{fmt.Sprintf("+1556%07d", n%10000000)}, T0, 0)
	if err != nil || len(nums) != 1 {
		t.Fatalf("announce a number: %+v (%v)", nums, err)
	}
	clock := func() time.Time { return T0 }
	sms := func(dev store.Device, clientID string) store.Message {
		return store.Message{UUID: fmt.Sprintf("closing-sms-%d", unique()), CompanyID: dev.CompanyID, DeviceID: dev.ID, Channel: "sms",
			Phone: "+15550009999", Text: "STOP", SIMSlot: "SIM1", Segments: 1, ClientID: clientID}
	}
	before := sms(d, "before")
	if _, _, err := s.StoreInbound(&before, clock); err != nil {
		t.Fatalf("an inbound SMS before the mark: %v", err)
	}
	waBefore := inboundTo(d, nums[0].Address, "wa-before")
	if _, _, err := s.StoreAgentInbound(&waBefore, clock); err != nil {
		t.Fatalf("an agent's inbound before the mark: %v", err)
	}
	upload := func(dev store.Device, id, key string, data []byte) (store.Media, bool, error) {
		return s.PutMedia(store.Media{ID: id, CompanyID: dev.CompanyID, DeviceID: dev.ID, Key: key, ContentType: "image/png", Filename: "a.png",
			Size: int64(len(data))}, bytes.NewReader(data), T0)
	}
	// A repeated key is answered as the upload stored first only while
	// the device is live and its company open.
	refusedRepeat := func(what string, dev store.Device, key string, first store.Media) {
		t.Helper()
		data := []byte("png again")
		if md, dup, err := upload(dev, fmt.Sprintf("med_closing_again_%d", unique()), key, data); !errors.Is(err, store.ErrDeviceGone) || dup || md.ID != "" {
			t.Errorf("%s: %+v (dup %v, %v), want store.ErrDeviceGone", what, md, dup, err)
		}
		if md, err := s.MediaByKey(dev.CompanyID, dev.ID, key); err != nil || md.ID != first.ID || md.Size != first.Size {
			t.Errorf("%s: the upload stored first is %+v (%v), want %+v kept", what, md, err, first)
		}
	}
	fileBefore, _, err := upload(d, fmt.Sprintf("med_closing_before_%d", n), "closing/before", []byte("png before the mark"))
	if err != nil {
		t.Fatalf("a file uploaded before the mark: %v", err)
	}
	deleted := Device(t, s, a.ID, fmt.Sprintf("closing-in-deleted-%d", n))
	fileDeleted, _, err := upload(deleted, fmt.Sprintf("med_closing_deleted_%d", n), "deleted/0", []byte("png before the deletion"))
	if err != nil {
		t.Fatalf("a file uploaded before its device's deletion: %v", err)
	}
	if _, err := s.DeleteDevice(a.ID, deleted.Fingerprint, T0); err != nil {
		t.Fatal(err)
	}
	refusedRepeat("a repeat of a file uploaded before its device was deleted", deleted, "deleted/0", fileDeleted)
	if _, err := s.MarkCompanyClosing(a.ID, T0.Add(time.Minute), func(store.Company, store.Subscription, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	gone := func(what string, got store.Message, dup bool, err error, m store.Message) {
		t.Helper()
		if !errors.Is(err, store.ErrDeviceGone) || errors.Is(err, store.ErrNotFound) || got.ID != 0 || dup {
			t.Errorf("%s under a closing company: %+v (dup %v, %v), want store.ErrDeviceGone alone", what, got, dup, err)
		}
		if stored, err := s.MessageByUUID(a.ID, m.UUID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s under a closing company was stored: %+v (%v)", what, stored, err)
		}
	}
	after := sms(d, "after")
	got, dup, err := s.StoreInbound(&after, clock)
	gone("an inbound SMS", got, dup, err, after)
	again := sms(d, "before")
	got, dup, err = s.StoreInbound(&again, clock)
	gone("a repeat of an inbound SMS stored before the mark", got, dup, err, again)
	wa := inboundTo(d, nums[0].Address, "wa-after")
	got, dup, err = s.StoreAgentInbound(&wa, clock)
	gone("an agent's inbound", got, dup, err, wa)
	waAgain := inboundTo(d, nums[0].Address, "wa-before")
	got, dup, err = s.StoreAgentInbound(&waAgain, clock)
	gone("a repeat of an agent's inbound stored before the mark", got, dup, err, waAgain)
	// A file an agent uploads (POST /device/media) is refused the same
	// way: the server checks its token again before it stores it, in a
	// transaction of its own, and a mark after that check stores nothing.
	data := []byte("png after the mark")
	if md, dup, err := s.PutMedia(store.Media{ID: fmt.Sprintf("med_closing_%d", n), CompanyID: a.ID, DeviceID: d.ID, Key: "closing/0",
		ContentType: "image/png", Filename: "a.png", Size: int64(len(data))}, bytes.NewReader(data), T0.Add(time.Minute)); !errors.Is(err, store.ErrDeviceGone) || dup || md.ID != "" {
		t.Errorf("a file uploaded under a closing company: %+v (dup %v, %v), want store.ErrDeviceGone", md, dup, err)
	}
	if md, err := s.MediaByKey(a.ID, d.ID, "closing/0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a file uploaded under a closing company was stored: %+v (%v)", md, err)
	}
	refusedRepeat("a repeat of a file uploaded before the mark", d, "closing/before", fileBefore)
	if list, err := s.OptOuts(a.ID, "", 10); err != nil || len(list) != 1 {
		t.Errorf("the closing company's opt-outs: %+v (%v), want the one its STOP before the mark listed", list, err)
	}

	kept := sms(other, "after")
	if got, dup, err := s.StoreInbound(&kept, clock); err != nil || dup || got.ID == 0 {
		t.Errorf("an inbound SMS of another company: %+v (dup %v, %v)", got, dup, err)
	}
}
