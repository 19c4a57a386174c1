package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/store/conformance"
)

// TestInboundMeetsAClosingMark: a received message (an SMS, StoreInbound;
// a WhatsApp message, StoreAgentInbound) whose write begins while its
// company's mark (MarkCompanyClosing) is under way, its row locked and
// its record not yet committed closing, waits for the mark and is then
// refused with store.ErrDeviceGone, nothing of it stored. Read unlocked,
// the company was open in the write's snapshot: the message was stored
// beside the mark, acknowledged, and taken by the removal after.
func TestInboundMeetsAClosingMark(t *testing.T) {
	t.Parallel()
	for _, channel := range []string{"sms", store.ChannelNameWhatsApp} {
		t.Run(channel, func(t *testing.T) {
			t.Parallel()
			s := openStore(t, Options{})
			c, _ := conformance.Company(t, s)
			d := conformance.Device(t, s, c.ID, "closing-race")
			m := store.Message{UUID: "closing-race-in", CompanyID: c.ID, DeviceID: d.ID, Channel: "sms", Phone: "+15550100000",
				Text: "hi", SIMSlot: "SIM1", Segments: 1, ClientID: "closing-race"}
			write := s.StoreInbound
			if channel != "sms" {
				nums, err := s.AnnounceNumbers(c.ID, d.ID, channel, []string{"+15550109999"}, conformance.T0, 0)
				if err != nil || len(nums) != 1 {
					t.Fatalf("announce: %+v (%v)", nums, err)
				}
				m.Channel, m.Account, m.SIMSlot, m.ContentType = channel, nums[0].Address, "", "text"
				write = s.StoreAgentInbound
			}
			inVet, release := make(chan struct{}), make(chan struct{})
			marked := make(chan error, 1)
			go func() {
				_, err := s.MarkCompanyClosing(c.ID, conformance.T0, func(store.Company, store.Subscription, bool) error {
					close(inVet)
					<-release
					return nil
				})
				marked <- err
			}()
			select { // the mark holds the company's row
			case <-inVet:
			case err := <-marked:
				t.Fatalf("the mark ended before its check: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("the mark did not reach its check in 30 s")
			}
			type result struct {
				m   store.Message
				err error
			}
			done := make(chan result, 1)
			go func() {
				got, _, err := write(&m, func() time.Time { return conformance.T0 })
				done <- result{got, err}
			}()
			var res *result
			waitLocksOrEnd(t, s, 1, func() bool {
				select {
				case r := <-done:
					res = &r
					return true
				default:
					return false
				}
			})
			close(release)
			if err := <-marked; err != nil {
				t.Fatalf("the mark: %v", err)
			}
			if res == nil {
				r := <-done
				res = &r
			}
			if !errors.Is(res.err, store.ErrDeviceGone) || res.m.ID != 0 {
				t.Errorf("a message written while its company's mark was under way: %+v (%v), want store.ErrDeviceGone", res.m, res.err)
			}
			if got, err := s.MessageByUUID(c.ID, m.UUID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the message was stored beside its company's mark: %d (%v)", got.ID, err)
			}
		})
	}
}
