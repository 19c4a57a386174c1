package smtpd

import (
	"net"
	"testing"
	"time"
)

// A shutdown that comes after go-smtp answered DATA with 354 and before it
// handed the text to the session (mailOpen) found no mail open and ended
// the connection; the text the client was told to send then timed out at
// its first read, and the mail was refused 421 4.4.2 where a mail in its
// text finishes (TestShutdownEndsConnectionsBetweenMails failed so on a
// loaded machine). The text's read waits for it once the mail opened.
func TestMailOpenedAfterTheDrainGetsItsText(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lv := newLives()
	ll := lifeListener{bound(ln, Config{}), time.Hour, lv}
	t.Cleanup(func() { _ = ll.Close() })
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	conn, err := ll.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := conn.(*lifeConn)
	lv.drain() // no mail open: the connection's life ends
	c.mailOpen()
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil { // as Data sets it
		t.Fatal(err)
	}
	if _, err := client.Write([]byte("Subject: x\r\n\r\nDisk full.\r\n.\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := c.Read(buf); err != nil || n == 0 {
		t.Fatalf("the text of a mail opened after the drain: read %d bytes, %v; want the text", n, err)
	}
	c.mailDone()
	if _, err := c.Read(buf); err == nil {
		t.Fatal("a read after the mail's reply on a draining connection: got no error, want the life ended")
	}
}
