package main

import (
	"bufio"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simrelay/simrelay/internal/freeport"
	"github.com/simrelay/simrelay/internal/poll"
)

// On SIGTERM the e-mail listener stops taking connections at once, with
// the HTTP server, not once every HTTP request has finished: a request
// still arriving holds the HTTP drain, and mail taken meanwhile would be
// queued to phones about to be told to come back (docs/email.md,
// "Shutdown").
func TestShutdownStopsTakingMailWithHTTP(t *testing.T) {
	t.Parallel()
	bin, st, _ := companyStore(t)
	smtpAddr := freeport.Addr(t)
	srv := startServer(t, bin, st, "--smtp-listen", smtpAddr, "--smtp-domain", "sms.test", "--shutdown-timeout", "30s")
	greets := func() bool {
		c, err := net.DialTimeout("tcp", smtpAddr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		return err == nil && strings.HasPrefix(line, "220")
	}
	if !greets() {
		t.Fatal("the e-mail listener does not greet before the shutdown")
	}
	// A request whose body is still coming: the HTTP drain waits for it.
	held, err := net.Dial("tcp", strings.TrimPrefix(srv.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.Write([]byte("POST /auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// The server says 100 Continue as its handler starts reading the body:
	// from then on the request is under way.
	_ = held.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(held).ReadString('\n'); err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("no 100 Continue for the held request: %q (%v)", line, err)
	}
	if _, err := held.Write([]byte("{")); err != nil {
		t.Fatal(err)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	poll.Within(t, 10*time.Second, "the shutdown's start", func() bool { return strings.Contains(srv.stderr.String(), "shutting down") })
	poll.Within(t, 10*time.Second, "the e-mail listener closed while the HTTP drain waits", func() bool { return !greets() })
	held.Close() // the drain ends; so does the server
	if err := srv.cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, srv.stderr.String())
	}
}
