package main

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/simrelay/simrelay/internal/freeport"
	"github.com/simrelay/simrelay/internal/poll"
	"github.com/simrelay/simrelay/internal/syncbuf"
	"github.com/simrelay/simrelay/mail/mailtest"
)

// TestEmailToSMS runs the README's e-mail to SMS: the server with
// --smtp-listen and a certificate made for the test, the virtual phone, and
// a mail sent over STARTTLS with the API key, which the phone reports
// delivered.
func TestEmailToSMS(t *testing.T) {
	t.Parallel()
	bin, st, apiKey := companyStore(t)
	serverTLS, clientTLS, err := mailtest.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(t.TempDir(), "cert.pem"), filepath.Join(t.TempDir(), "key.pem")
	cert := serverTLS.Certificates[0]
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	smtpAddr := freeport.Addr(t)
	srv := startServer(t, bin, st, "--smtp-listen", smtpAddr, "--smtp-domain", "sms.test", "--smtp-cert", certFile, "--smtp-key", keyFile)
	// The start's line names the listener apart from the outgoing mail.
	var line string
	poll.Within(t, 10*time.Second, "the start's log line", func() bool {
		line = listeningLine(srv.stderr.String())
		return line != ""
	})
	if !strings.Contains(line, "smtp_listen="+smtpAddr) || !strings.Contains(line, "mail_out=") {
		t.Errorf("the start's log line should name the e-mail listener (smtp_listen=%s) and the outgoing mail (mail_out=): %s", smtpAddr, line)
	}

	phone := exec.Command(bin, "phone", "--server", srv.url, "--api-key", apiKey, "--token-file", filepath.Join(t.TempDir(), "phone.json"))
	out := &syncbuf.Buffer{}
	phone.Stdout, phone.Stderr = out, out
	if err := phone.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = phone.Process.Kill(); _ = phone.Wait() })
	waitOutput(t, out, "connected")

	host, port, _ := net.SplitHostPort(smtpAddr)
	p, _ := strconv.Atoi(port)
	c, err := gomail.NewClient(host, gomail.WithPort(p), gomail.WithTLSPolicy(gomail.TLSMandatory), gomail.WithTLSConfig(clientTLS),
		gomail.WithSMTPAuth(gomail.SMTPAuthPlain), gomail.WithUsername(apiKey), gomail.WithPassword("x"), gomail.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := gomail.NewMsg()
	_ = m.From("app@example.com")
	_ = m.To("+15557654321@sms.test")
	m.Subject("order")
	m.SetBodyString(gomail.TypeTextHTML, "<p>Your order has shipped.</p><div class=\"gmail_quote\">earlier mail</div>")
	if err := c.DialAndSend(m); err != nil {
		t.Fatalf("send: %v\n%s", err, srv.stderr.String())
	}
	waitOutput(t, out, ": reported sent, then delivered")
	_, body := get(t, srv.url+"/chat/messages?device_fingerprint=virtual-phone&phone=%2B15557654321", apiKey)
	if !strings.Contains(string(body), `"message":"Your order has shipped."`) || !strings.Contains(string(body), `"phone":"+15557654321"`) {
		t.Errorf("history: got %s, want the mail's text to +15557654321", body)
	}
}
