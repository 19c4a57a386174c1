package smtpd

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/simrelay/simrelay/account"
	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/sms"
	"github.com/simrelay/simrelay/store"
)

// IdempotencyRoute scopes the idempotency keys of mail sends (store.IdempotencyKey.Route).
const IdempotencyRoute = "smtp"

// session is one connection's state; go-smtp calls its methods from that
// connection's goroutine only.
type session struct {
	s     *Server
	conn  *smtp.Conn // its connection, for a mail that stops arriving (unread)
	life  *lifeConn  // the connection as accepted; nil only outside Serve
	ip    string
	p     account.Principal
	key   string // the API key the session logged in with; "" before AUTH
	from  string // the mail's envelope sender (MAIL FROM), for its key (mailKey)
	rcpts []recipient
	// credit: a request was counted in the API key's rate limit (by the
	// login or the MAIL) that no recipient has used yet; the next MAIL or
	// RCPT is in it. Reset (RSET, a new greeting, a mail's end) spends it,
	// so a MAIL after RSET counts again.
	credit bool

	mu      sync.Mutex     // guards chunked: Data runs on go-smtp's goroutine of a chunked mail
	chunked *io.PipeReader // the text of the last chunked (BDAT) mail, until settleChunked
}

// recipient is an accepted RCPT: the number and the device (and SIM) or
// the sender pool that sends to it.
type recipient struct {
	phone, device, slot string
	pool                string
}

var (
	errAuthRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0},
		Message: "Log in first: AUTH PLAIN with the company's API key as the user name"}
	errAuthFailed = &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8},
		Message: "Authentication failed: the user name (or the password) must be the company's current API key"}
	errUnavailable = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0},
		Message: "The server could not take the message now; try again later"}
)

func (ss *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (ss *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(_, user, pass string) error { return ss.login(user, pass) }), nil
}

// login takes the API key from the user name or, for clients that keep
// only the password secret, from the password. A client address that has
// spent its credential tries (--rate-auth) is refused before the key is
// looked at, so the answer tells nothing about it.
func (ss *session) login(user, pass string) error {
	if spent, wait := ss.s.deps.Limits.CredentialsSpent(ss.ip); spent {
		return &smtp.SMTPError{Code: 454, EnhancedCode: smtp.EnhancedCode{4, 7, 0},
			Message: fmt.Sprintf("Too many failed logins from this address; try again in %s", problem.Count(int(wait.Seconds())+1, "second"))}
	}
	key := user
	if !strings.HasPrefix(key, account.APIKeyPrefix) {
		key = pass
	}
	p, err := ss.s.deps.Accounts.Authenticate(context.Background(), key)
	switch {
	case err == nil && strings.HasPrefix(key, account.APIKeyPrefix):
		// A login is a request of the key, as an API call with it is: a
		// client that connected, logged in and left had the key checked
		// without end. Its count covers the mail that follows (credit).
		// Past the window, 454: RFC 4954's temporary failure of AUTH.
		if err := ss.countRequest(p, 454); err != nil {
			return err
		}
		ss.p, ss.key, ss.credit = p, key, true
		return nil
	case err == nil || problem.Is(err, problem.Unauthorized):
		// A wrong key, or an access token: it lives 15 minutes, no
		// credential for a mail client.
		ss.s.deps.Limits.CountCredentialFailure(ss.ip)
		ss.s.log.Info("smtp login refused", "ip", ss.ip)
		return errAuthFailed
	default:
		ss.s.log.Error("smtp login", "err", err)
		return errUnavailable
	}
}

// Mail begins a mail. It is a request in the API key's general window, as
// its key check makes it one: uncounted, a client that sent only MAIL and
// RSET had the key checked without end. A MAIL right after the login is
// in the login's count, and the mail's first RCPT in the MAIL's (credit),
// so a mail to n recipients costs n requests, as n API sends would, and
// one to none costs one.
func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if err := ss.keyCurrent(); err != nil {
		return err
	}
	if !ss.credit {
		if err := ss.countRequest(ss.p, 452); err != nil {
			return err
		}
	}
	ss.settleChunked()
	ss.from, ss.rcpts, ss.credit = from, nil, true
	return nil
}

// countRequest counts one request in the API key's general window (p's)
// and refuses it past the window: code (452 at MAIL and RCPT, 454 at AUTH)
// 4.7.0 with the seconds to wait.
func (ss *session) countRequest(p account.Principal, code int) error {
	if res := ss.s.deps.Limits.CountRequest(p.Identity()); !res.Allowed {
		return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode{4, 7, 0},
			Message: fmt.Sprintf("Rate limit: %s in this window; retry after %s", problem.Count(res.Limit, "request"), problem.Count(res.ResetSeconds(), "second"))}
	}
	return nil
}

// keyCurrent checks that the session logged in (530 before AUTH) and that
// the API key it logged in with is still the company's, as the API checks
// its key on every request: rotating the key (after a leak) stopped new
// logins, while a session open with the old one went on sending for up to
// its 30 minutes. A rotated key is answered 421 4.7.0 and the connection
// closed (go-smtp takes no second AUTH in a session): the client connects
// again and logs in with the current key.
func (ss *session) keyCurrent() error {
	if ss.key == "" {
		return errAuthRequired
	}
	_, err := ss.s.deps.Accounts.Authenticate(context.Background(), ss.key)
	switch {
	case err == nil:
		return nil
	case problem.Is(err, problem.Unauthorized):
		ss.s.log.Info("smtp session's API key no longer valid (rotated, or its company closed); connection closed", "company_id", ss.p.CompanyID)
		return ss.hangUp(keyRotatedReply)
	default:
		ss.s.log.Error("smtp login check", "err", err)
		return errUnavailable
	}
}

// settleChunked waits until go-smtp's goroutine of the last chunked (BDAT)
// mail has passed Data's answer on, before a new mail can start another:
// that goroutine sends the answer on a channel of the connection that the
// next BDAT replaces, so one still running after an RSET could answer the
// next mail with the reset one's error and never end. It closes the mail's
// reader after sending, which a read of the reader then tells. Mail calls
// it (a BDAT needs a MAIL first); Data returns at once on a reset mail, so
// the wait is short.
func (ss *session) settleChunked() {
	ss.mu.Lock()
	pr := ss.chunked
	ss.chunked = nil
	ss.mu.Unlock()
	if pr == nil {
		return
	}
	// The mail's text has ended (LAST, RSET or the connection's end), so a
	// read answers at once: the writer's error until the reader is closed.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if _, err := pr.Read(nil); errors.Is(err, io.ErrClosedPipe) {
			return
		}
	}
}

// Rcpt reads the address, finds the device, refuses a number on the
// company's opt-out list and counts the send in the credential's rate
// limit, as a POST /chat/send would count.
func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := ss.keyCurrent(); err != nil {
		return err
	}
	// Every recipient is one request in the key's window, counted before it
	// is read, as every API request counts whatever its answer: a refused
	// address costs the store reads below too, and was free before, so one
	// connection could name unknown pools without end. The mail's first
	// recipient was counted with its MAIL (or the login before it).
	if ss.credit {
		ss.credit = false
	} else if err := ss.countRequest(ss.p, 452); err != nil {
		return err
	}
	// The company is read only for what the address leaves to it: the
	// region of a number without its +, the e-mail device of an address
	// that names neither a device nor a pool.
	var co *store.Company
	company := func() (store.Company, error) {
		if co == nil {
			c, err := ss.s.deps.Accounts.Company(context.Background(), ss.p)
			if err != nil {
				ss.s.log.Error("smtp company", "err", err)
				return c, errUnavailable
			}
			co = &c
		}
		return *co, nil
	}
	a, err := parseAddress(to, ss.s.cfg.Domain, func() (string, error) {
		c, err := company()
		return c.Region, err
	})
	if err != nil {
		return err
	}
	rc := recipient{phone: a.Phone}
	if a.Pool != "" {
		if rc.pool, err = ss.pool(a.Pool); err != nil {
			return err
		}
	} else {
		dev, err := ss.device(a, company)
		if err != nil {
			return err
		}
		rc.device, rc.slot = dev.Fingerprint, slotOf(dev)
	}
	// An opted-out number is refused here, for itself alone: at DATA its
	// refusal would stop the recipients after it, and the sending server
	// would bounce the whole mail. The send checks the list again in its
	// commit, for a STOP that arrives between RCPT and DATA.
	if err := ss.s.deps.SMS.CheckOptOut(context.Background(), ss.p.CompanyID, rc.phone); err != nil {
		return reply(err, rc.phone, nil, keyNone, ss.s.log)
	}
	for _, r := range ss.rcpts {
		if r == rc {
			return nil // the same SMS twice in one mail is sent once
		}
	}
	ss.rcpts = append(ss.rcpts, rc)
	return nil
}

// pool is the name of the company's sender pool an address names, as the
// pool spells it: names are matched without case, as the API matches them
// (both stores key a pool by its name lower-cased with strings.ToLower).
// strings.EqualFold folds further: it took "ſales" (the long s, a pool of
// its own) for "sales". The pool chooses the device and SIM when the SMS is
// queued.
func (ss *session) pool(name string) (string, error) {
	pools, err := ss.s.deps.SMS.Pools(context.Background(), ss.p.CompanyID)
	if err != nil {
		ss.s.log.Error("smtp pools", "err", err)
		return "", errUnavailable
	}
	key := strings.ToLower(name)
	for _, p := range pools {
		if strings.ToLower(p.Name) == key {
			return p.Name, nil
		}
	}
	return "", &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "The company has no sender pool named " + asciiLine(name)}
}

// device is the device a recipient's SMS goes through: the one its address
// names, or else the company's default: its emailDevice setting (of the
// company as Rcpt reads it), or its only device.
func (ss *session) device(a Address, company func() (store.Company, error)) (store.Device, error) {
	ctx := context.Background()
	named := a.Device
	if named == "" {
		co, err := company()
		if err != nil {
			return store.Device{}, err
		}
		named = co.EmailDevice
	}
	if named != "" {
		d, err := ss.s.deps.Devices.Get(ctx, ss.p.CompanyID, named)
		if problem.Is(err, problem.NotFound) && a.Device == "" {
			return d, &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1},
				Message: "The company's e-mail device (emailDevice of PATCH /company) is no longer paired; name a device in the address or set another"}
		}
		if problem.Is(err, problem.NotFound) {
			return d, &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "The company has no device with that fingerprint"}
		}
		if err != nil {
			ss.s.log.Error("smtp device", "err", err)
			return d, errUnavailable
		}
		return d, nil
	}
	devs, err := ss.s.deps.Devices.List(ctx, ss.p.CompanyID)
	if err != nil {
		ss.s.log.Error("smtp devices", "err", err)
		return store.Device{}, errUnavailable
	}
	switch len(devs) {
	case 1:
		return devs[0], nil
	case 0:
		return store.Device{}, &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "The company has no device to send from; pair a phone first"}
	default:
		return store.Device{}, &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 3},
			Message: "The company has several devices: name one in the address, e.g. +15551234567+dev-FINGERPRINT@" + ss.s.cfg.Domain + ", or set emailDevice with PATCH /company"}
	}
}

// slotOf is the SIM a mail's SMS leaves from: the device's selected SIM,
// or for BOTH its first announced SIM (SIM1 when it announced none).
func slotOf(d store.Device) string {
	switch {
	case proto.IsSIMSlot(d.SelectedSIM):
		return d.SelectedSIM
	case len(d.SIMs) > 0:
		return d.SIMs[0].Slot
	}
	return proto.SIM1
}

// Data queues one SMS per recipient through the API's send. A mail with a
// Message-ID, or without one but with a Date, is idempotent per recipient
// for 24 h, as a send with an Idempotency-Key (mailKey): a client that
// retries it after a temporary refusal (or a lost reply) never sends an SMS
// twice.
func (ss *session) Data(r io.Reader) error {
	if ss.life != nil {
		// The mail's text begins: a shutdown now lets it finish. Before
		// (after MAIL or RCPT) nothing of it is queued, and a shutdown ends
		// the connection at once, as one between mails: a client quiet
		// there held the shutdown for its whole timeout.
		ss.life.mailOpen()
	}
	pr, chunked := r.(*io.PipeReader)
	if chunked { // a chunked mail, on its own goroutine
		ss.mu.Lock()
		ss.chunked = pr
		ss.mu.Unlock()
		if ss.life != nil {
			ss.life.inText.Store(true)
			defer ss.life.inText.Store(false)
		}
	} else {
		// The whole text must come within Config.Timeout of DATA. go-smtp
		// set the deadline when it began to wait for the DATA command, so
		// a client that took most of the timeout to send DATA had its text
		// cut soon after. (The connection's life still bounds it.)
		_ = ss.conn.Conn().SetReadDeadline(time.Now().Add(ss.s.cfg.Timeout))
	}
	raw, err := io.ReadAll(r) // bounded by MaxMessageBytes: go-smtp answers 552 beyond it
	if err == nil && ss.readsEnded() {
		// A BDAT chunk that the connection's end cut short reads as a whole
		// one (go-smtp's io.Copy takes the end of the data for the chunk's):
		// queued, it sent the first part of the text as the SMS. DATA's text
		// needs its final dot, so a cut one fails above.
		err = io.ErrUnexpectedEOF
	}
	if err == nil && chunked && lineOver(raw, maxLineLength) {
		// go-smtp reads chunks without its line limit, but for the bytes it
		// read with the BDAT command: a long line was refused there and
		// taken further on. Refused wherever it is, as after DATA.
		err = smtp.ErrTooLongLine
	}
	if err != nil {
		return ss.unread(err)
	}
	// ss.rcpts holds at least one recipient: go-smtp answers a DATA with no
	// accepted RCPT 502 5.5.1 itself, without calling Data (optout_test.go).
	if err := ss.keyCurrent(); err != nil { // rotated while the text came
		return err
	}
	m, err := ReadMail(raw)
	if err != nil {
		// The reason quotes what could not be read (a header's value, a
		// charset's name), as long as the mail made it: cut, as a refused
		// send's reason is, to keep the reply within a line.
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "The mail cannot be read: " + cutReason(asciiLine(err.Error()))}
	}
	mk := keyOf(m, ss.from)
	var queued []string
	for _, rc := range ss.rcpts {
		if err := ss.send(rc, m, mk); err != nil {
			return reply(err, rc.phone, queued, mk.kind, ss.s.log)
		}
		queued = append(queued, rc.phone)
	}
	ss.s.log.Info("mail queued as sms", "company_id", ss.p.CompanyID, "recipients", len(queued))
	return nil
}

// The answers to a mail whose text did not arrive whole; the connection is
// closed after either.
const (
	unreadText      = "The mail's text did not arrive in time; closing, send it again"
	unreadReply     = "421 4.4.2 " + unreadText + "\r\n"
	longLineReply   = "500 5.4.0 A line of the mail is longer than 2000 bytes (mail clients wrap lines at 998); closing\r\n"
	keyRotatedReply = "421 4.7.0 The API key this session logged in with is no longer valid (rotated, or its company closed); closing, log in again with the current key\r\n"
)

// unread answers a mail whose text did not arrive whole. A chunked mail
// the client reset is none (go-smtp has answered the RSET). Over the size
// limit is go-smtp's own 552. A line over the limit is refused for good
// (the same mail fails again). Otherwise the connection failed in the
// middle of the text, most often at the read deadline (the whole text must
// come within Config.Timeout of DATA): the client gets 421 4.4.2, a
// temporary failure that its retry (safe with the Message-ID) gets past.
// Either way the connection is closed, as RFC 5321 has it after a timeout:
// left open, the rest of the text would be read as commands. go-smtp's
// answer was 554 5.0.0 with its error (for a timeout, the socket's
// addresses): permanent, so a mail server bounced the mail of a client on
// a slow link, and followed by a second reply for a long line.
func (ss *session) unread(err error) error {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se
	}
	if errors.Is(err, smtp.ErrDataReset) && !ss.readsEnded() {
		// The client ended a chunked mail itself with RSET: go-smtp has
		// answered it, nothing is queued, and the session goes on. A 421
		// here came after RSET's 250 as the answer to the client's next
		// command, while a next mail it had pipelined was queued all the
		// same (its answer lost): told to send it again, the client sent
		// it twice. (A chunk that the connection's end or its deadline cut
		// resets the mail too, and is answered below.)
		return err
	}
	answer := unreadReply
	if errors.Is(err, smtp.ErrTooLongLine) {
		answer = longLineReply
	}
	if ss.life != nil && ss.life.answered.Load() { // go-smtp gave errTextStalled as the answer
		answer = ""
	}
	ss.s.log.Info("mail text did not arrive whole; connection closed", "company_id", ss.p.CompanyID, "err", err)
	return ss.hangUp(answer)
}

// hangUp writes answer (when not "") and closes the connection, for a
// reply after which the session cannot go on. It returns the error for
// go-smtp, whose own reply then goes nowhere; its next read ends the
// session.
func (ss *session) hangUp(answer string) error {
	nc := ss.conn.Conn()
	if answer != "" {
		// The kernel's buffer takes the line without the client reading; the
		// deadline only guards against a full one.
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(nc, answer)
	}
	_ = nc.Close()
	return errUnavailable
}

// lineOver reports whether text has a line longer than max, counted as
// go-smtp's reader of a mail after DATA counts it: the bytes from the line
// feed before it (the command's, for the first) to its own.
func lineOver(text []byte, max int) bool {
	n := 1
	for _, c := range text {
		if c == '\n' {
			n = 0
		}
		if n++; n > max {
			return true
		}
	}
	return false
}

// readsEnded reports whether a read of the connection failed or met the end
// of the client's data.
func (ss *session) readsEnded() bool { return ss.life != nil && ss.life.ended.Load() }

// keyKind is what keys a mail's sends, and so what its retry does.
type keyKind int

const (
	keyNone      keyKind = iota // neither Message-ID nor Date: sent every time it arrives
	keyMessageID                // its Message-ID
	keyContent                  // no Message-ID: a digest of the mail itself, its Date in it
)

// mailKey is what makes a mail's sends idempotent: its id, with each
// recipient's route and number, is the idempotency key of that recipient's
// send (the company is the key's scope, as for the API).
type mailKey struct {
	kind keyKind
	id   string
}

// keyOf is the key of a mail whose envelope sender is from. A mail with a
// Message-ID is keyed by it. One without a Message-ID but with a Date
// (which every mail program and library writes) is keyed by a digest of
// what makes the mail itself: the envelope sender, the Date, From, To and
// Cc as given, the Subject and the SMS text (decoded). The same mail sent
// again is the same key, and any change to it another; and as the text is
// in the key, one key never meets another text (the send's "another text"
// refusal cannot misfire). With neither header nothing tells a retry from a
// new mail that says the same (a monitor's alert sent every hour): such a
// mail is sent every time it arrives.
func keyOf(m Mail, from string) mailKey {
	switch {
	case m.MessageID != "":
		return mailKey{kind: keyMessageID, id: m.MessageID}
	case strings.TrimSpace(m.Header.Get("Date")) == "":
		return mailKey{kind: keyNone}
	}
	h := sha256.New()
	field := func(v string) {
		// Each value with its length: no two lists of values write the
		// same bytes.
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write([]byte(v))
	}
	field("simrelay smtp mail v1")
	field(from)
	for _, name := range []string{"Date", "From", "To", "Cc", "Subject"} {
		vs := m.Header[name] // every such header, in order (mail.Header's keys are canonical)
		field(strconv.Itoa(len(vs)))
		for _, v := range vs {
			field(v)
		}
	}
	field(m.Text)
	// A Message-ID cannot begin with a line feed (it is a header's value,
	// trimmed): the two kinds' keys never meet.
	return mailKey{kind: keyContent, id: "\n" + hex.EncodeToString(h.Sum(nil))}
}

func (ss *session) send(rc recipient, m Mail, mk mailKey) error {
	key := store.IdempotencyKey{Route: IdempotencyRoute}
	if mk.kind != keyNone {
		to := rc.device
		if rc.pool != "" {
			// Its own space: a pool and a device may share a name.
			to = "pool\x00" + strings.ToLower(rc.pool)
		}
		// A Message-ID's key is as it was before mails without one had
		// keys: a retry across the upgrade finds its first send.
		sum := sha256.Sum256([]byte(mk.id + "\x00" + to + "\x00" + rc.phone))
		key.Key = hex.EncodeToString(sum[:])
		text := sha256.Sum256([]byte(m.Text))
		key.Digest = hex.EncodeToString(text[:])
	}
	answer := func(msg store.Message) (int, []byte) {
		body, _ := json.Marshal(map[string]string{"queueId": msg.UUID})
		return http.StatusAccepted, body
	}
	_, prior, err := ss.s.deps.SMS.Send(context.Background(), sms.SendInput{
		CompanyID: ss.p.CompanyID, UserID: ss.p.UserID, Device: rc.device, Pool: rc.pool, Phone: rc.phone,
		Message: m.Text, SIMSlot: rc.slot, IdempotencyKey: key,
	}, answer)
	if err != nil {
		return err
	}
	// Only a Message-ID's key can meet another text: a digest's key has the
	// text in it.
	if prior != nil && prior.Digest != key.Digest {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 0},
			Message: "This Message-ID was sent within 24 hours with another text; send the new text as a new mail"}
	}
	return nil
}

// Reset ends the mail: go-smtp calls it after a mail's reply, on RSET and
// on a new greeting.
func (ss *session) Reset() {
	ss.rcpts, ss.credit = nil, false
	if ss.life != nil {
		ss.life.mailDone()
	}
}

func (ss *session) Logout() error { return nil }

// maxReplyReason bounds the refusal's own words in a reply, so that the
// line, with the recipient, the retry hint and the (at most 9) recipients
// queued before, stays within RFC 5321's 512 octets: a pool's refusal gives
// the reason of each member, of up to 200.
const maxReplyReason = 180

// reply turns a refused send into the SMTP reply a mail client shows: 550
// for what a retry cannot change, 452 for limits that renew, 451 for a
// fault of the server or a pool none of whose members can send now. It
// names the recipient, and those queued before it: a retry of the same
// mail does not queue them again when it has a key (a Message-ID, or a Date
// with the digest of the mail), and does when it has none; keyed says
// which, and the reply tells.
func reply(err error, to string, queued []string, keyed keyKind, log *slog.Logger) error {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se
	}
	pe, ok := problem.As(err)
	if !ok {
		log.Error("smtp send", "err", err)
		return errUnavailable
	}
	code, enh := 550, smtp.EnhancedCode{5, 0, 0}
	msg, hint := pe.Message, ""
	switch pe.Code {
	case problem.RecipientOptedOut:
		enh = smtp.EnhancedCode{5, 7, 1}
	case problem.RateLimited, problem.PlanLimitReached, problem.StorageBudgetExceeded:
		code, enh = 452, smtp.EnhancedCode{4, 2, 2}
	case problem.SIMCapped, problem.PoolCapped:
		// A SIM's cap renews at midnight UTC (or with the month): the
		// client's retry after the hint goes out.
		code, enh = 452, smtp.EnhancedCode{4, 2, 2}
		hint = "; retry after " + problem.Count(pe.RetryAfter, "second")
	case problem.PoolUnavailable:
		// No member can send now: its devices disabled or deleted, its SIMs
		// not the ones they send from, or resting after carrier errors (15
		// minutes). Each ends without the mail changing, by the company's
		// hand or by time, and a mail server keeps a 4xx mail and retries
		// it for days, safely (the Message-ID's key), where a 550 would
		// drop the message at the first outage of the pool's phones.
		code, enh = 451, smtp.EnhancedCode{4, 4, 4}
	case problem.NotFound:
		enh = smtp.EnhancedCode{5, 1, 1}
	case problem.DeviceDisabled, problem.SIMMismatch:
		enh = smtp.EnhancedCode{5, 2, 1}
	case problem.ValidationFailed:
		enh = smtp.EnhancedCode{5, 6, 0}
		if pe.Field == "message" {
			msg = pe.Refield("The SMS text (the mail's body, signature and quoted reply cut)").Message
		}
	case problem.Internal, problem.Unavailable:
		return errUnavailable
	}
	msg = cutReason(asciiLine(strings.TrimSuffix(msg, ".")))
	msg = "To " + to + ": " + msg + hint
	if len(queued) > 0 {
		msg += "; already queued for " + strings.Join(queued, ", ")
		switch keyed {
		case keyMessageID:
			msg += " (a retry of this mail with its Message-ID does not queue them again)"
		case keyContent:
			// Keyed by a digest of the mail: the same mail again (a mail
			// server's queue resends it byte for byte) is the same key.
			msg += " (a retry of this mail unchanged, its Date too, does not queue them again)"
		default:
			// Nothing keys the sends of a mail with neither header: its
			// retry, which a 4xx invites, sends them again.
			msg += " (the mail has neither Message-ID nor Date: a retry queues them again)"
		}
	}
	return &smtp.SMTPError{Code: code, EnhancedCode: enh, Message: asciiLine(msg)}
}

// cutReason cuts a reply's reason (ASCII, from asciiLine) at maxReplyReason.
func cutReason(msg string) string {
	if len(msg) > maxReplyReason {
		msg = msg[:maxReplyReason-4] + " ..."
	}
	return msg
}

// asciiLine keeps a reply on one line of printable ASCII, as SMTP replies are.
func asciiLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return ' '
		}
		return r
	}, s)
}
