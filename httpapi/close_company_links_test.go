package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	proto "github.com/simrelay/simrelay/android-protocol"
	"github.com/simrelay/simrelay/billing"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/storetest"
	"github.com/simrelay/simrelay/store"
	"github.com/simrelay/simrelay/webhook"
)

// churnLinks links the phone of token again and again, each link held a
// few milliseconds from its welcome and closed by the phone, as a phone on a flapping
// network, until closing is closed: from then on each link is held until
// the server closes it, which must be with 4503 within 10 s, and the
// phone dials again until the upgrade is refused (401), which ends it.
// opened counts the links whose welcome came. At most 2,000 links.
func (e *env) churnLinks(token string, closing <-chan struct{}, opened *atomic.Int64) error {
	hello, err := proto.Encode(proto.Hello{Protocol: proto.Version, AppVersion: "test", SIMs: []proto.SIM{{Slot: "SIM1"}}})
	if err != nil {
		return err
	}
	isClosing := func() bool {
		select {
		case <-closing:
			return true
		default:
			return false
		}
	}
	for range 2000 {
		ws, res, err := e.phonesDial(token)
		if err != nil {
			switch {
			case res != nil && res.StatusCode == http.StatusUnauthorized && isClosing():
				return nil
			case res != nil:
				return fmt.Errorf("dial: HTTP %d (closing %v)", res.StatusCode, isClosing())
			}
			return fmt.Errorf("dial: %w", err)
		}
		ended := make(chan error, 1)
		welcomed := make(chan struct{}, 1)
		go func() {
			ctx := context.Background()
			if err := ws.Write(ctx, websocket.MessageText, hello); err != nil {
				ended <- err
				return
			}
			for {
				_, data, err := ws.Read(ctx)
				if err != nil {
					ended <- err
					return
				}
				if f, _ := proto.Decode(data); f != nil {
					if _, ok := f.(*proto.Welcome); ok {
						opened.Add(1)
						welcomed <- struct{}{}
					}
				}
			}
		}()
		// Held from its welcome (however long the hello takes) for a few
		// milliseconds.
		select {
		case <-ended: // the server closed it; dial again
			continue
		case <-welcomed:
		case <-closing:
		}
		hold := time.NewTimer(time.Duration(rand.IntN(10)) * time.Millisecond)
		select {
		case <-ended: // the server closed it; dial again
			hold.Stop()
			continue
		case <-hold.C:
			if !isClosing() {
				_ = ws.Close(websocket.StatusNormalClosure, "")
				<-ended
				continue
			}
		case <-closing:
			hold.Stop()
		}
		// The company is closing: the server must close this link.
		wait := time.NewTimer(10 * time.Second)
		select {
		case err := <-ended:
			wait.Stop()
			if code := websocket.CloseStatus(err); code != proto.CloseDeviceGone {
				return fmt.Errorf("a link open at the closing ended with %d (%v), want %d", code, err, proto.CloseDeviceGone)
			}
		case <-wait.C:
			ws.CloseNow()
			return errors.New("a link open at the closing was not closed by the server within 10 s")
		}
	}
	return errors.New("the upgrade was never refused")
}

// DELETE /company while the company's phones link again and again: every
// link open at the 202, or opened while the request ran, is closed by the
// server with 4503, and every upgrade after it is refused (401), whatever
// the moment each link opened at (before the closing mark, between the
// devices' list and the removal's first step, after it).
func TestClosingRacesLinkOpens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, roomy)
	a := e.newCompany("Acme Racing", "owner@racing.test")
	const phones = 8
	fps := make([]string, phones)
	tokens := make([]string, phones)
	for i := range phones {
		fps[i] = fmt.Sprintf("racing-phone-%d", i)
		tokens[i] = e.pairPhone(a.apiKey, fps[i]).DeviceToken
	}
	closing := make(chan struct{})
	opened := make([]atomic.Int64, phones)
	errs := make([]error, phones)
	var wg sync.WaitGroup
	for i := range phones {
		wg.Go(func() { errs[i] = e.churnLinks(tokens[i], closing, &opened[i]) })
	}
	poll.Within(t, time.Minute, "every phone linked a few times", func() bool {
		for i := range opened {
			if opened[i].Load() < 3 {
				return false
			}
		}
		return true
	})
	close(closing)
	e.want(e.do(call{method: "DELETE", path: "/company", token: a.access, body: map[string]any{"confirm": "Acme Racing"}}), http.StatusAccepted, "")
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", fps[i], err)
		}
	}
	for _, fp := range fps {
		if linked(e.hub, fp) {
			t.Errorf("%s still has a link on the hub", fp)
		}
	}
}

// stepsFail is a real store whose company removal steps fail while fail
// is set, as a database out of reach fails them, and that runs afterList
// (once) when a company's devices were read.
type stepsFail struct {
	store.Backend
	fail      atomic.Bool
	mu        sync.Mutex
	afterList func()
}

func (s *stepsFail) RemoveCompanyStep(companyID uint64, limit int) (store.CompanyRemoval, error) {
	if s.fail.Load() {
		return store.CompanyRemoval{}, errors.New("store: remove company: the database does not answer")
	}
	return s.Backend.RemoveCompanyStep(companyID, limit)
}

func (s *stepsFail) CompanyDevices(companyID uint64) ([]store.Device, error) {
	devs, err := s.Backend.CompanyDevices(companyID)
	s.mu.Lock()
	f := s.afterList
	s.afterList = nil
	s.mu.Unlock()
	if f != nil {
		f()
	}
	return devs, err
}

// A phone that links between DELETE /company's read of the devices and
// the removal's first step (forced: its whole upgrade and hello run
// there) is refused (401): the company is marked closing. (It linked
// before, and was closed with 4503 once the first step was taken, on one
// node; this holds wherever the link is, and whatever the step does.)
func TestLinkBetweenTheDeviceListAndTheFirstStep(t *testing.T) {
	t.Parallel()
	st := &stepsFail{Backend: storetest.OpenWith(t, storetest.Options{})}
	e := newEnvOn(t, st, webhook.Config{}, billing.Config{}, roomy)
	a := e.newCompany("Acme Window", "owner@window.test")
	reg := e.pairPhone(a.apiKey, "window-phone")
	hello, err := proto.Encode(proto.Hello{Protocol: proto.Version, AppVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var ws *websocket.Conn
	ended := make(chan error, 1)
	var refused bool
	st.afterList = func() {
		conn, res, err := e.phonesDial(reg.DeviceToken)
		if err != nil {
			refused = res != nil && res.StatusCode == http.StatusUnauthorized
			if !refused {
				t.Errorf("a link in the window: %v", err)
			}
			return
		}
		ws = conn
		if err := ws.Write(context.Background(), websocket.MessageText, hello); err != nil {
			t.Errorf("hello: %v", err)
		}
		_, data, err := ws.Read(context.Background())
		if f, _ := proto.Decode(data); err != nil || f == nil || f.FrameType() != proto.TypeWelcome {
			t.Errorf("the link in the window: %s (%v), want its welcome", data, err)
		}
		go func() {
			for {
				if _, _, err := ws.Read(context.Background()); err != nil {
					ended <- err
					return
				}
			}
		}()
	}
	e.want(e.do(call{method: "DELETE", path: "/company", token: a.access, body: map[string]any{"confirm": "Acme Window"}}), http.StatusAccepted, "")
	if !refused {
		if ws == nil {
			t.Fatal("the window's link was neither refused nor opened")
		}
		t.Error("a phone linked after the company was marked closing, want its upgrade refused (401)")
		select {
		case err := <-ended:
			if code := websocket.CloseStatus(err); code != proto.CloseDeviceGone {
				t.Errorf("the link opened in the window ended with %d (%v), want %d", code, err, proto.CloseDeviceGone)
			}
		case <-time.After(10 * time.Second):
			ws.CloseNow()
			t.Fatal("the link opened in the window was not closed within 10 s")
		}
	}
	e.eventually("no link of the phone", func() bool { return !linked(e.hub, "window-phone") })
}

// A closing whose first removal step fails leaves the company closing with
// its credentials stored until a later try succeeds (minutes, an hour
// after many failures): they are refused all the same from the closing
// mark on. The phone is closed with 4503 and its reconnection is refused
// (401); the API key, the admin's access and refresh tokens and a login
// with the admin's password work on no request, though the store still
// holds them all.
func TestClosingWhoseFirstStepFailedRefusesItsCredentials(t *testing.T) {
	t.Parallel()
	st := &stepsFail{Backend: storetest.OpenWith(t, storetest.Options{})}
	e := newEnvOn(t, st, webhook.Config{}, billing.Config{}, roomy)
	a := e.newCompany("Acme Failing", "owner@failing.test")
	reg := e.pairPhone(a.apiKey, "failing-phone")
	vp := e.runPhone(reg, "SIM1", false)
	st.fail.Store(true)
	r := e.do(call{method: "DELETE", path: "/company", token: a.access, body: map[string]any{"confirm": "Acme Failing"}})
	if r.Status != http.StatusInternalServerError {
		t.Fatalf("DELETE /company whose first step failed: %d %s, want 500", r.Status, r.Raw)
	}
	if co, err := st.Company(uint64(a.id)); err != nil || co.ClosingAt.IsZero() {
		t.Fatalf("the company: %+v (%v), want it stored and closing", co, err)
	}
	e.phonesWaitClosed(vp, proto.CloseDeviceGone)
	e.phonesWantRefused(reg.DeviceToken, http.StatusUnauthorized, "unauthorized")
	for name, token := range map[string]string{"API key": a.apiKey, "admin's access token": a.access} {
		if r := e.do(call{method: "GET", path: "/company", token: token}); r.Status != http.StatusUnauthorized {
			t.Errorf("the closing company's %s: %d %s, want 401", name, r.Status, r.Raw)
		}
	}
	if r := e.do(call{method: "POST", path: "/auth/refresh", body: map[string]any{"refreshToken": a.refresh}}); r.Status != http.StatusUnauthorized {
		t.Errorf("a refresh of the closing company's admin: %d %s, want 401", r.Status, r.Raw)
	}
	if r := e.do(call{method: "POST", path: "/auth/login", body: map[string]any{"email": a.email, "password": a.password}}); r.Status != http.StatusUnauthorized {
		t.Errorf("a login of the closing company's admin: %d %s, want 401", r.Status, r.Raw)
	}
	if linked(e.hub, "failing-phone") {
		t.Error("the phone of the closing company is linked")
	}
}
