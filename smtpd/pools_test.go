package smtpd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	gomail "github.com/wneessen/go-mail"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/sms"
)

// pool defines a round-robin sender pool of the devices' SIM1.
func (e *env) pool(companyID uint64, name string, fingerprints ...string) {
	e.t.Helper()
	var ms []sms.PoolMemberInput
	for _, fp := range fingerprints {
		ms = append(ms, sms.PoolMemberInput{Device: fp, SIMSlot: proto.SIM1})
	}
	if _, err := e.sms.CreatePool(context.Background(), companyID, sms.PoolInput{Name: &name, Members: &ms}); err != nil {
		e.t.Fatal(err)
	}
}

// TestMailThroughPool: +NUMBER+pool-NAME@domain queues the SMS through
// the pool, which picks the phone (round robin here, the name matched
// without case); a resent mail queues nothing new; an unknown pool, or
// another company's, is 550 5.1.1.
func TestMailThroughPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	otherID, otherKey := e.company("other")
	phones := []*vphone{e.phone(id, "pool-a"), e.phone(id, "pool-b")}
	e.phone(otherID, "other-1")
	e.pool(id, "alerts", "pool-a", "pool-b")
	e.pool(otherID, "theirs", "other-1")
	c := e.mailer(key, "x")

	send := func() error {
		m := gomail.NewMsg()
		_ = m.From("app@example.com")
		_ = m.To("+15551234567+pool-alerts@"+domain, "+15551234568+pool-ALERTS@"+domain)
		m.SetMessageIDWithValue("pool-1@example.com")
		m.SetBodyString(gomail.TypeTextPlain, "Disk full on db-1")
		return c.DialAndSend(m)
	}
	for i := range 2 { // the second is a client's retry: nothing new
		if err := send(); err != nil {
			t.Fatalf("send %d through the pool: %v", i+1, err)
		}
	}
	poll.Until(t, "each phone of the pool gets one SMS", func() bool {
		return len(phones[0].Jobs()) == 1 && len(phones[1].Jobs()) == 1
	})
	to := map[string]bool{}
	for _, vp := range phones {
		j := vp.Jobs()[0]
		to[j.To] = true
		if j.Message != "Disk full on db-1" || j.SIMSlot != proto.SIM1 {
			t.Errorf("job %+v, want the mail's text from SIM1", j)
		}
	}
	if !to["+15551234567"] || !to["+15551234568"] {
		t.Errorf("the phones texted %v, want both recipients", to)
	}
	// The retry's copies, had they been queued, would be on the phones by
	// the time a fresh send is.
	if err := e.send(c, "fresh", "+15551234569+dev-pool-a@"+domain); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the fresh mail reaches pool-a", func() bool { return len(phones[0].Jobs()) == 2 })
	if n := len(phones[1].Jobs()); n != 1 {
		t.Errorf("pool-b got %d jobs, want 1: the resent mail queued again", n)
	}

	for _, addr := range []string{"+15551234567+pool-nope@" + domain, "+15551234567+pool-theirs@" + domain} {
		err := e.send(c, "hi", addr)
		if smtpCode(err) != 550 || !strings.Contains(err.Error(), "5.1.1") || !strings.Contains(err.Error(), "no sender pool") {
			t.Errorf("to %s: got %v (code %d), want 550 5.1.1 naming the pool", addr, err, smtpCode(err))
		}
	}
	if err := e.send(e.mailer(otherKey, "x"), "theirs", "+15551234567+pool-theirs@"+domain); err != nil {
		t.Errorf("the other company through its own pool: %v", err)
	}
}

// TestMailThroughPoolRefusals: a pool at its SIMs' caps answers 452 with
// the seconds to wait; one that no member can send from answers 451, a
// temporary refusal a mail server retries.
func TestMailThroughPoolRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	e.phone(id, "cap-a")
	e.phone(id, "cap-b")
	e.pool(id, "alerts", "cap-a", "cap-b")
	c := e.mailer(key, "x")
	one := int64(1)
	for _, fp := range []string{"cap-a", "cap-b"} {
		if _, err := e.sms.SetSIMCaps(context.Background(), id, fp, []sms.SIMCapsInput{{Slot: proto.SIM1, PerDay: &one}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := e.send(c, "ok", "+1555123450"+string(rune('0'+i))+"+pool-alerts@"+domain); err != nil {
			t.Fatalf("send %d within the caps: %v", i+1, err)
		}
	}
	err := e.send(c, "over", "+15551234509+pool-alerts@"+domain)
	if smtpCode(err) != 452 || !strings.Contains(err.Error(), "4.2.2") || !strings.Contains(err.Error(), "retry after") {
		t.Errorf("over the pool's caps: got %v (code %d), want 452 4.2.2 with the seconds to wait", err, smtpCode(err))
	}
	// A device named in the address, at its SIM's cap: the same reply.
	err = e.send(c, "over", "+15551234509+dev-cap-a@"+domain)
	if smtpCode(err) != 452 || !strings.Contains(err.Error(), "retry after") {
		t.Errorf("over the device's cap: got %v (code %d), want 452 with the seconds to wait", err, smtpCode(err))
	}

	disabled := "disabled"
	for _, fp := range []string{"cap-a", "cap-b"} {
		if _, err := e.sms.SetSIMCaps(context.Background(), id, fp, []sms.SIMCapsInput{{Slot: proto.SIM1}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.devices.Update(context.Background(), id, fp, device.Patch{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
	}
	err = e.send(c, "nobody", "+15551234509+pool-alerts@"+domain)
	if smtpCode(err) != 451 || !strings.Contains(err.Error(), "4.4.4") || !strings.Contains(err.Error(), "disabled") {
		t.Errorf("no member can send: got %v (code %d), want 451 4.4.4 saying why", err, smtpCode(err))
	}

	// A pool of 16 members gives 16 reasons: the reply stays within SMTP's
	// 512 octets a line.
	users, err := e.store.CompanyUsers(id)
	if err != nil {
		t.Fatal(err)
	}
	var fps []string
	for i := range 16 {
		fps = append(fps, fmt.Sprintf("fleet-%02d", i))
	}
	if _, err := e.devices.Provision(context.Background(), id, users[0].ID, fps); err != nil {
		t.Fatal(err)
	}
	for _, fp := range fps {
		if _, err := e.devices.Update(context.Background(), id, fp, device.Patch{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
	}
	e.pool(id, "fleet", fps...)
	err = e.send(c, "nobody", "+15551234509+pool-fleet@"+domain)
	_, text, _ := strings.Cut(fmt.Sprint(err), `451 "`)
	text, _, _ = strings.Cut(text, `"`)
	if smtpCode(err) != 451 || len("451 ")+len(text)+len("\r\n") > 512 || !strings.HasSuffix(text, " ...") {
		t.Errorf("a long refusal: got %v (%d bytes), want a 451 line of at most 512 octets, cut", err, len(text))
	}
}

// TestMailPoolNameFoldsAsTheAPI: an address names the pool whose name is
// the same once both are lower-cased with strings.ToLower, as the stores
// key pool names and the API finds them. strings.EqualFold folds further
// and sent mail for the pool "ſales" (the long s: a name of its own, which
// the API lets stand beside "sales") through "sales".
func TestMailPoolNameFoldsAsTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	plain, long := e.phone(id, "plain-s"), e.phone(id, "long-s")
	e.pool(id, "sales", "plain-s")
	e.pool(id, "\u017fales", "long-s")
	for i, to := range []string{"+15551234567+pool-\u017fALES@" + domain, "+15551234568+pool-SALES@" + domain} {
		d := e.rawSession(key)
		d.say("MAIL FROM:<app@example.com>", "250")
		d.say("RCPT TO:<"+to+">", "250")
		d.say("DATA", "354")
		d.write(fmt.Sprintf("Subject: x\r\n\r\nmail %d\r\n.\r\n", i))
		if got := d.reply(); !strings.HasPrefix(got, "250 ") {
			t.Fatalf("mail to %s: got %q, want 250", to, got)
		}
	}
	poll.Until(t, "each pool's phone gets its SMS", func() bool { return len(plain.Jobs())+len(long.Jobs()) == 2 })
	if j := long.Jobs(); len(j) != 1 || j[0].To != "+15551234567" {
		t.Errorf("the pool %q's phone got %+v, want the mail to +15551234567", "\u017fales", j)
	}
	if j := plain.Jobs(); len(j) != 1 || j[0].To != "+15551234568" {
		t.Errorf("the pool %q's phone got %+v, want the mail to +15551234568", "sales", j)
	}
}
