package smtpd_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/simrelay/simrelay/account"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/testhttp"
	"github.com/simrelay/simrelay/pacing"
	"github.com/simrelay/simrelay/smtpd"
)

// TestMailReachesThePhone: a real mail client sends over STARTTLS with
// AUTH, and the SMS, signature and quoted reply cut, reaches the phone.
func TestMailReachesThePhone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	body := "Your table is ready.\n\nOn Mon, 2 Mar 2026, Ann <ann@example.com> wrote:\n> Is it ready?\n\n-- \nAcme Diner\n+1 555 0100\n"
	if err := e.send(e.mailer(key, "x"), body, "+1-555-123-4567@"+domain); err != nil {
		t.Fatalf("send: %v", err)
	}
	poll.Until(t, "the phone gets the SMS", func() bool { return len(vp.Jobs()) == 1 })
	job := vp.Jobs()[0]
	if job.To != "+15551234567" || job.Message != "Your table is ready." {
		t.Errorf("job to %q text %q, want +15551234567 and %q", job.To, job.Message, "Your table is ready.")
	}
	// The device named in the address, with the API key given as the password.
	if err := e.send(e.mailer("apikey", key), "Second", "+15551234568+dev-pixel7@"+domain); err != nil {
		t.Fatalf("send naming the device: %v", err)
	}
	poll.Until(t, "the phone gets the second SMS", func() bool { return len(vp.Jobs()) == 2 })
	if got := vp.Jobs()[1]; got.To != "+15551234568" || got.Message != "Second" {
		t.Errorf("second job to %q text %q", got.To, got.Message)
	}
}

// TestRefusalsAreSMTPReplies: bad auth, a bad address, an opted-out number
// and a company over its plan get the replies a mail client shows.
func TestRefusalsAreSMTPReplies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	c := e.mailer(key, "x")

	err := e.send(e.mailer("sk_"+strings.Repeat("0", 40), "x"), "hi", "+15551234567@"+domain)
	if err == nil || !strings.Contains(err.Error(), "535") {
		t.Errorf("wrong key: got %v, want a 535 reply", err)
	}
	for _, to := range []string{"15551234567@" + domain, "+1555@" + domain, "+15551234567+nonsense@" + domain, "+15551234567@other.test"} {
		if err := e.send(c, "hi", to); smtpCode(err) != 550 {
			t.Errorf("to %s: got %v (code %d), want 550", to, err, smtpCode(err))
		}
	}
	if err := e.send(c, "hi", "+15551234567+dev-nosuch@"+domain); smtpCode(err) != 550 {
		t.Errorf("unknown device: got %v, want 550", err)
	}
	if _, _, err := e.sms.AddOptOut(context.Background(), id, "+15550000001"); err != nil {
		t.Fatal(err)
	}
	err = e.send(c, "hi", "+15550000001@"+domain)
	if smtpCode(err) != 550 || !strings.Contains(err.Error(), "opt") {
		t.Errorf("opted-out number: got %v (code %d), want 550 naming the opt-out", err, smtpCode(err))
	}
	if err := e.send(c, strings.Repeat("x", 1601), "+15551234567@"+domain); smtpCode(err) != 550 {
		t.Errorf("text over 1600 characters: got %v, want 550", err)
	}

	// A company on a plan of one message a month: the second is over it.
	if _, err := e.billing.Subscribe(context.Background(), billing.SubscribeInput{CompanyID: id, PlanID: onePlan}); err != nil {
		t.Fatal(err)
	}
	if err := e.send(c, "first", "+15551234567@"+domain); err != nil {
		t.Fatalf("first send on the plan: %v", err)
	}
	err = e.send(c, "second", "+15551234567@"+domain)
	if smtpCode(err) != 452 {
		t.Errorf("over the plan: got %v (code %d), want 452", err, smtpCode(err))
	}
	poll.Until(t, "the phone gets the one SMS that was queued", func() bool { return len(vp.Jobs()) == 1 })
	if got := vp.Jobs()[0].Message; got != "first" {
		t.Errorf("the phone got %q, want first", got)
	}
}

// TestSendsCountInTheAPIRateLimit: each recipient is a send in the API
// key's general window (the login and the MAIL counted in the first); past
// it, RCPT answers 452, and a new connection's login 454 (the client logs
// in for each mail).
func TestSendsCountInTheAPIRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{general: pacing.Rate{Limit: 3, Window: time.Hour}})
	id, key := e.company("acme")
	e.phone(id, "pixel7")
	c := e.mailer(key, "x")
	if err := e.send(c, "hi", "+15551234567@"+domain, "+15551234568@"+domain, "+15551234569@"+domain); err != nil {
		t.Fatalf("three sends within the limit: %v", err)
	}
	err := e.send(c, "hi", "+15551234570@"+domain)
	if err == nil || !strings.Contains(err.Error(), "454") || !strings.Contains(err.Error(), "Rate limit") {
		t.Errorf("fourth send: got %v, want its login refused 454 for the rate limit", err)
	}
}

// TestFailedLoginsSpendTheAddressWindow: failed logins count in the API's
// credential window of the client address; once it is spent even the right
// key is refused, so the answer tells no guess right from wrong.
func TestFailedLoginsSpendTheAddressWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{auth: pacing.Rate{Limit: 3, Window: time.Hour}})
	id, key := e.company("acme")
	e.phone(id, "pixel7") // its POST /device/register is the address's first try of three
	bad := e.mailer("sk_"+strings.Repeat("1", 40), "x")
	for i := range 2 {
		if err := e.send(bad, "hi", "+15551234567@"+domain); err == nil || !strings.Contains(err.Error(), "535") {
			t.Fatalf("wrong key, try %d: got %v, want 535", i+1, err)
		}
	}
	err := e.send(e.mailer(key, "x"), "hi", "+15551234567@"+domain)
	if err == nil || !strings.Contains(err.Error(), "454") {
		t.Errorf("right key after the window was spent: got %v, want 454", err)
	}
}

// TestConnectionsPerAddressAreBounded: a connection over the per-address
// limit gets 421 and is closed; when one closes, the next is served.
func TestConnectionsPerAddressAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: smtpd.Config{MaxConnsPerIP: 2}})
	greet := func() (net.Conn, string) {
		c, err := net.DialTimeout("tcp", e.smtpAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("greeting: %v", err)
		}
		return c, line
	}
	var held []net.Conn
	for range 2 {
		c, line := greet()
		if !strings.HasPrefix(line, "220 ") {
			t.Fatalf("greeting %q, want 220", line)
		}
		held = append(held, c)
	}
	c, line := greet()
	c.Close()
	if !strings.HasPrefix(line, "421 ") {
		t.Errorf("third connection got %q, want 421", line)
	}
	held[0].Close()
	poll.Until(t, "the closed connection is released", func() bool { return e.smtp.Open() == 1 })
	c, line = greet()
	defer c.Close()
	if !strings.HasPrefix(line, "220 ") {
		t.Errorf("after one closed: %q, want 220", line)
	}
	held[1].Close()
}

// TestResentMailQueuesOnce: a mail sent again with its Message-ID (a
// client's retry) queues nothing new; the same Message-ID with another
// text is refused.
func TestResentMailQueuesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	c := e.mailer(key, "x")
	send := func(text string) error {
		m := gomail.NewMsg()
		_ = m.From("app@example.com")
		_ = m.To("+15551234567@"+domain, "+15551234568@"+domain)
		m.SetMessageIDWithValue("retry-1@example.com")
		m.SetBodyString(gomail.TypeTextPlain, text)
		return c.DialAndSend(m)
	}
	for i := range 2 {
		if err := send("once"); err != nil {
			t.Fatalf("send %d: %v", i+1, err)
		}
	}
	if err := send("another text"); smtpCode(err) != 550 {
		t.Errorf("the Message-ID with another text: got %v (code %d), want 550", err, smtpCode(err))
	}
	if err := e.send(c, "fresh", "+15551234567@"+domain); err != nil {
		t.Fatal(err)
	}
	// The fresh mail queued after the resends: once it is on the phone, so
	// is everything queued before it.
	poll.Until(t, "the fresh mail reaches the phone", func() bool {
		jobs := vp.Jobs()
		return len(jobs) > 0 && jobs[len(jobs)-1].Message == "fresh"
	})
	if got := len(vp.Jobs()); got != 3 {
		t.Errorf("the phone got %d jobs, want 3 (two recipients once, then the fresh mail)", got)
	}
}

// TestCompanyEmailDevice: a company with several devices must name one in
// the address, or set its e-mail device with PATCH /company, which then
// takes the mail whose address names none. Deleting that device clears
// the setting: GET /company shows none, and the mail goes through the
// company's only device left.
func TestCompanyEmailDevice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	first, second := e.phone(id, "pixel7"), e.phone(id, "pixel8")
	_, otherKey := e.company("other")
	c := e.mailer(key, "x")
	if err := e.send(c, "hi", "+15551234567@"+domain); smtpCode(err) != 550 || !strings.Contains(err.Error(), "several devices") {
		t.Errorf("two devices, none named: got %v, want 550 asking for one", err)
	}
	call := func(method, path, apiKey, body string) (int, string) {
		req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := testhttp.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw)
	}
	patch := func(apiKey, body string) (int, string) { return call(http.MethodPatch, "/company", apiKey, body) }
	if code, body := patch(key, `{"emailDevice":"nosuch"}`); code != http.StatusBadRequest || !strings.Contains(body, `"field":"emailDevice"`) {
		t.Errorf("an unknown device: got %d %s, want 400 on emailDevice", code, body)
	}
	if code, body := patch(otherKey, `{"emailDevice":"pixel8"}`); code != http.StatusBadRequest {
		t.Errorf("another company's device: got %d %s, want 400", code, body)
	}
	if code, body := patch(key, `{"emailDevice":"pixel8"}`); code != http.StatusOK || !strings.Contains(body, `"emailDevice":"pixel8"`) {
		t.Fatalf("set pixel8: got %d %s", code, body)
	}
	if err := e.send(c, "to the default", "+15551234567@"+domain); err != nil {
		t.Fatalf("send with the e-mail device set: %v", err)
	}
	poll.Until(t, "pixel8 gets the SMS", func() bool { return len(second.Jobs()) == 1 })
	if n := len(first.Jobs()); n != 0 {
		t.Errorf("pixel7 got %d jobs, want 0", n)
	}
	if code, body := call(http.MethodDelete, "/device/delete/pixel8", key, ""); code != http.StatusOK {
		t.Fatalf("delete pixel8: got %d %s", code, body)
	}
	if code, body := call(http.MethodGet, "/company", key, ""); code != http.StatusOK || strings.Contains(body, "emailDevice") {
		t.Errorf("GET /company after deleting the e-mail device: got %d %s, want no emailDevice", code, body)
	}
	if err := e.send(c, "to the one left", "+15551234567@"+domain); err != nil {
		t.Fatalf("send after deleting the e-mail device: %v", err)
	}
	poll.Until(t, "pixel7 gets the SMS", func() bool { return len(first.Jobs()) == 1 })
}

// TestRcptReadsTheCompanyOnlyWhenNeeded: a recipient reads the company
// record only for what its address leaves to it, once at most: the region
// of a number without its +, the e-mail device of an address that names
// neither a device nor a pool. An address with a + number that names a
// device or a pool reads none.
func TestRcptReadsTheCompanyOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	e.phone(id, "pixel7")
	gb := "GB"
	if _, err := e.accounts.UpdateCompany(context.Background(), account.Principal{CompanyID: id}, account.CompanyPatch{Region: &gb}); err != nil {
		t.Fatal(err)
	}
	d := e.rawSession(key)
	d.say("MAIL FROM:<monitor@example.com>", "250")
	for _, tc := range []struct {
		to, reply string
		reads     int64
	}{
		{"+15551234567+dev-pixel7", "250", 0},
		{"+15551234568+dev-nosuch", "550", 0},
		{"+15551234569+pool-nosuch", "550", 0},
		{"+15551234571+", "550", 0},          // a + naming nothing: refused, not the e-mail device
		{"+15551234570", "250", 1},           // the e-mail device
		{"07400123456+dev-pixel7", "250", 1}, // the region
		{"07400123457", "250", 1},            // both, from one read
	} {
		before := e.companyReads.Load()
		d.say("RCPT TO:<"+tc.to+"@"+domain+">", tc.reply)
		if got := e.companyReads.Load() - before; got != tc.reads {
			t.Errorf("RCPT %s: %d reads of the company, want %d", tc.to, got, tc.reads)
		}
	}
}

// TestAuthNeedsTLS: with a certificate configured, AUTH before STARTTLS is
// refused, so the API key never crosses the network in the clear; and MAIL
// before AUTH is refused.
func TestAuthNeedsTLS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	_, key := e.company("acme")
	c, err := net.DialTimeout("tcp", e.smtpAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	reply := func() string {
		var last string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if last = line; len(line) < 4 || line[3] != '-' {
				return last
			}
		}
	}
	reply() // greeting
	_, _ = c.Write([]byte("EHLO client.test\r\n"))
	reply()
	plain := base64.StdEncoding.EncodeToString([]byte("\x00" + key + "\x00x"))
	_, _ = c.Write([]byte("AUTH PLAIN " + plain + "\r\n"))
	if got := reply(); !strings.HasPrefix(got, "523 ") {
		t.Errorf("AUTH before STARTTLS: got %q, want 523", got)
	}
	// Not logged in, the session takes no mail.
	_, _ = c.Write([]byte("MAIL FROM:<app@example.com>\r\n"))
	if got := reply(); !strings.HasPrefix(got, "530 5.7.0 ") {
		t.Errorf("MAIL before AUTH: got %q, want 530 5.7.0", got)
	}
}

// TestMailOverTheSizeIsRefused: a mail over the announced SIZE gets 552 and
// queues nothing; a smaller one still goes.
func TestMailOverTheSizeIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: smtpd.Config{MaxMessageBytes: 4096}})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	c := e.mailer(key, "x")
	if err := e.send(c, "hi\n\n"+strings.Repeat("> quoted line\n", 400), "+15551234567@"+domain); smtpCode(err) != 552 {
		t.Errorf("a mail over the size: got %v (code %d), want 552", err, smtpCode(err))
	}
	if err := e.send(c, "small", "+15551234567@"+domain); err != nil {
		t.Fatalf("a small mail: %v", err)
	}
	poll.Until(t, "the small mail reaches the phone", func() bool { return len(vp.Jobs()) == 1 })
	if got := vp.Jobs()[0].Message; got != "small" {
		t.Errorf("the phone got %q, want small", got)
	}
}

// A company with a region may write the number without its +, as on the
// API; a company without one keeps the international rule.
func TestMailToANationalNumber(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	other, otherKey := e.company("other")
	e.phone(other, "pixel8")
	req, _ := http.NewRequest(http.MethodPatch, e.url+"/company", strings.NewReader(`{"region":"GB"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := testhttp.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("PATCH /company region: %d", res.StatusCode)
	}
	if err := e.send(e.mailer(key, "x"), "Table ready", "07400-123456@"+domain); err != nil {
		t.Fatalf("send to a national number: %v", err)
	}
	poll.Until(t, "the phone gets the SMS", func() bool { return len(vp.Jobs()) == 1 })
	if job := vp.Jobs()[0]; job.To != "+447400123456" {
		t.Errorf("job to %q, want +447400123456", job.To)
	}
	if err := e.send(e.mailer(key, "x"), "hi", "074001@"+domain); smtpCode(err) != 550 || !strings.Contains(err.Error(), "too short") {
		t.Errorf("a short national number: got %v, want 550 saying it is too short", err)
	}
	if err := e.send(e.mailer(otherKey, "x"), "hi", "07400123456@"+domain); smtpCode(err) != 550 {
		t.Errorf("no region: got %v, want 550", err)
	}
}

// TestNULInTheTextIsRefused: a mail whose text holds U+0000 is refused as
// a text the API refuses (550 5.6.0), on either store, and queues nothing.
// PostgreSQL cannot hold U+0000, so it used to be 451 there: a fault of the
// server, which a mail server retries for days.
func TestNULInTheTextIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	c := e.mailer(key, "x")
	err := e.send(c, "code\x00 4711", "+15551234567@"+domain)
	if smtpCode(err) != 550 || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("text with NUL: got %v (code %d), want 550 naming the NUL", err, smtpCode(err))
	}
	if err := e.send(c, "code 4711", "+15551234567@"+domain); err != nil {
		t.Fatalf("the next mail: %v", err)
	}
	poll.Until(t, "the phone gets the one SMS", func() bool { return len(vp.Jobs()) == 1 })
	if got := vp.Jobs()[0].Message; got != "code 4711" {
		t.Errorf("the phone got %q", got)
	}
}

// TestInvisibleTextIsRefused: a mail whose text is nothing visible (a
// zero-width space, a word joiner) is refused as the API refuses such a
// message (550 5.6.0) and queues nothing; a visible text beside them goes.
func TestInvisibleTextIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, key := e.company("acme")
	vp := e.phone(id, "pixel7")
	c := e.mailer(key, "x")
	err := e.send(c, "\u200b \u2060", "+15551234567@"+domain)
	if smtpCode(err) != 550 || !strings.Contains(err.Error(), "5.6.0") || !strings.Contains(err.Error(), "visible") {
		t.Fatalf("an invisible text: got %v (code %d), want 550 5.6.0 asking for a visible character", err, smtpCode(err))
	}
	if err := e.send(c, "\u200bcode 4711", "+15551234567@"+domain); err != nil {
		t.Fatalf("the next mail: %v", err)
	}
	poll.Until(t, "the phone gets the one SMS", func() bool { return len(vp.Jobs()) == 1 })
	if got := vp.Jobs()[0].Message; got != "\u200bcode 4711" {
		t.Errorf("the phone got %+q", got)
	}
}
