package gateway

// The link's hello: the phone's first frame, and the second look at the
// device's token and status once the link is registered.

import (
	"bytes"
	"context"
	"errors"
	"time"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/channel"
	"github.com/simrelay/simrelay/device"
	"github.com/simrelay/simrelay/problem"
	"github.com/simrelay/simrelay/store"
)

// hello waits for the phone's first frame and records it.
func (c *conn) hello() bool {
	h := c.hub
	timer := time.AfterFunc(h.cfg.HelloTimeout, func() { c.closeWith(proto.CloseHelloTimeout, "no hello in time") })
	_, data, err := c.ws.Read(context.Background())
	timer.Stop()
	if err != nil {
		return false
	}
	// The hello is sent unasked, and counts as every such frame does
	// (contract section 11): the first of the link, it always fits, and is
	// taken from the flood limiter when the link's first charge makes it.
	c.helloAt = time.Now().UnixNano()
	f, err := proto.Decode(withoutNUL(data))
	hello, isHello := f.(*proto.Hello)
	switch {
	case frameType(data) != proto.TypeHello:
		c.fail(proto.CloseProtocolError, "protocol_error", "The first frame must be hello.")
		return false
	case err != nil || !isHello:
		c.fail(proto.CloseProtocolError, "protocol_error", "hello: "+frameProblem(err))
		return false
	}
	if hello.Protocol != proto.Version {
		c.fail(proto.CloseUnsupportedVer, "unsupported_protocol", "This server speaks protocol version 1.")
		return false
	}
	sims := make([]store.SIM, 0, len(hello.SIMs))
	for _, s := range hello.SIMs {
		sims = append(sims, store.SIM(s))
	}
	if hello.SIMs == nil {
		sims = nil
	}
	// A bad entry refuses the whole hello (PROTOCOL.md section 16.1): every
	// part of it is checked before any is stored, so that a refused hello
	// leaves the device's SIMs, app version, health and last seen, and the
	// numbers' holders, as they were. The agents' part, its numbers,
	// handles and jobs (more than proto.MaxHelloJobs refuse it: its
	// numbers are not taken from the agents holding them by an agent the
	// refusal leaves without a link), is checked once, here, and stored as
	// the check found it.
	checked, err := h.devices.CheckHello(hello.SelectedSIM, sims, hello.AppVersion, hello.Health)
	announces := h.agents != nil && (len(hello.WhatsApp) > 0 || len(hello.IMessage) > 0)
	var agent channel.CheckedAnnounce
	if err == nil && h.agents != nil && (announces || hello.Jobs != nil) {
		agent, err = h.agents.CheckAnnounce(context.Background(), c.dev, *hello)
	}
	// store.ErrDeviceGone here is the read of the device's company (store
	// DeviceCompany): the device deleted, or its company closing or
	// removed, since the upgrade, as the hello's write below would find it.
	if err != nil {
		c.refuseHello(err, "check hello numbers")
		return false
	}
	// The write checks, in its transaction, the token and the status the
	// upgrade checked, and the company: one changed since (the device
	// paired again, disabled, deleted, its company closing) refuses the
	// link as the second look would, having stored nothing of the hello
	// and raised no device.online (PROTOCOL.md sections 7.1 and 16.1).
	// The link is not registered yet: it displaced no older link, and the
	// change's own close reaches that one. The device gone is the store's
	// word alone (store.ErrDeviceGone, store UpdateDeviceWith); any other
	// error, store.ErrNotFound of another record included, is a fault.
	dev, err := h.devices.Hello(context.Background(), c.dev, checked)
	switch {
	case errors.Is(err, device.ErrTokenRevoked):
		c.closeWith(proto.CloseBadToken, "token revoked")
		return false
	case errors.Is(err, store.ErrDeviceDisabled):
		c.closeWith(proto.CloseDeviceGone, "device disabled")
		return false
	}
	if err != nil {
		c.refuseHello(err, "store hello")
		return false
	}
	// The link needs none of the health report: it stays in the store.
	dev.Health = nil
	c.dev = dev
	c.helloStored = true
	// A hello that announces no number still lets go the ones the device
	// held (PROTOCOL.md section 16.1). The device write above says whether
	// it holds any (store.Device.NoNumbers), so the hello of an SMS phone
	// that holds none makes no agent write.
	if announces || (h.agents != nil && !dev.NoNumbers) {
		// store.ErrDeviceGone here: deleted, or its company marked closing,
		// since the device write above (store AnnounceAgentNumbers reads it
		// in the numbers' write), and nothing of the numbers was stored.
		ids, err := h.agents.Announce(context.Background(), dev, agent)
		if err != nil {
			c.refuseHello(err, "store hello numbers")
			return false
		}
		for _, id := range ids {
			c.lines = append(c.lines, line{id: id})
		}
	}
	if h.agents != nil && hello.Jobs != nil {
		// After the numbers: a job handed to this registration and not
		// named is another agent's once the number has moved, and this
		// link (which pumps once the hello is done) has not written it.
		if err := h.agents.Release(context.Background(), dev, agent); err != nil {
			c.refuseHello(err, "release the agent jobs its hello does not hold")
			return false
		}
	}
	c.touch()
	return true
}

// refusal is why the second look refused a link, as it closed it: code
// and reason, 0 and "" when what refused it says nothing of the device (a
// store fault, a claim that failed); and for a revoked token (4501), the
// hash of the device's token now. The link it displaced (giveBack) is
// closed with it unless spares says otherwise.
type refusal struct {
	code    int
	reason  string
	current []byte // 4501: the device's token hash at the look
}

// stillAllowed re-checks the device token and status, closing the link with
// the code the phone must see when either changed; it returns the device as
// stored now, or why the link was refused (nil when it was not).
func (c *conn) stillAllowed() (store.Device, *refusal) {
	token := c.token
	c.token = "" // checked once more, here; not kept for the link's life
	dev, err := c.hub.devices.Authenticate(context.Background(), token)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// The token is dead: the device was deleted, or registered again with
		// a new token. A device of the fingerprint with another id is a new
		// registration after a delete: for this link, the device is gone.
		// Only a lookup that finds no device says it was deleted: one that
		// failed (the database gone since the token's look) says nothing of
		// the device, and a phone told 4503 would stop reconnecting.
		d, err := c.hub.devices.Get(context.Background(), c.dev.CompanyID, c.dev.Fingerprint)
		switch {
		case notFound(err) || err == nil && d.ID != c.dev.ID:
			return dev, c.refuse(&refusal{code: proto.CloseDeviceGone, reason: "device deleted"})
		case err != nil:
			c.storeFault(err, "look up device of a revoked token", "device", c.dev.Fingerprint)
			return dev, &refusal{}
		}
		return dev, c.refuse(&refusal{code: proto.CloseBadToken, reason: "token revoked", current: d.TokenHash})
	case err != nil:
		c.storeFault(err, "re-check device token", "device", c.dev.Fingerprint)
		return dev, &refusal{}
	case dev.Status == store.DeviceDisabled:
		return dev, c.refuse(&refusal{code: proto.CloseDeviceGone, reason: "device disabled"})
	}
	return dev, nil
}

// refuse closes the link as r says, and returns r.
func (c *conn) refuse(r *refusal) *refusal {
	c.closeWith(r.code, r.reason)
	return r
}

// spares says whether old, the link that c, refused by r, displaced, keeps
// its place. A refusal that says nothing of the device spares it. A device
// deleted or disabled (4503) spares only a link of another registration of
// the fingerprint (c's was deleted, and that one is the device's now): a
// link of c's registration is closed as c was, as the deletion or
// disabling would have closed it had it been registered then (a Disconnect
// made while c held the place closed c only). A token revoked (4501)
// spares old only if it authenticated with the device's current token;
// one on a revoked token (c's, when a phone's second link raced the
// re-registration that revoked it) is closed too. old.dev is the device as
// old's hello stored it, so its TokenHash is that of old's token: a token
// revoked between the upgrade and the hello would have stored another, and
// old's own second look closes that link.
func (r *refusal) spares(c, old *conn) bool {
	switch r.code {
	case proto.CloseDeviceGone:
		return old.dev.ID != c.dev.ID
	case proto.CloseBadToken:
		return bytes.Equal(old.dev.TokenHash, r.current)
	}
	return true
}

// notFound says err is a store's answer that the device is not there: the
// store's own (store.ErrNotFound) or the device service's (its 404
// problem). Nothing else a lookup returns says the device is gone.
func notFound(err error) bool {
	return errors.Is(err, store.ErrNotFound) || problem.Is(err, problem.NotFound)
}

// refuseHello ends the link at a hello that err refuses: the store's word
// that the device is gone (store.ErrDeviceGone, and only it) closes it
// 4503, a problem of the hello's content as invalid_hello naming the
// hello's field, and any other error, store.ErrNotFound of another record
// included, is a store fault of doing.
func (c *conn) refuseHello(err error, doing string) {
	if errors.Is(err, store.ErrDeviceGone) {
		c.closeWith(proto.CloseDeviceGone, "device deleted")
		return
	}
	if pe, ok := problem.As(err); ok {
		c.fail(proto.CloseProtocolError, "invalid_hello", pe.Refield("hello."+pe.Field).Message)
		return
	}
	c.storeFault(err, doing, "device", c.dev.Fingerprint)
}
