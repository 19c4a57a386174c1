package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/simrelay/simrelay/mail/mailtest"
)

// A certificate renewed on disk (certbot replaces the files every 60 days)
// is the one the e-mail listener's STARTTLS serves from the next
// handshake. The files were read once at the start: after the old one
// expired, every client that checks the certificate refused the listener
// (and AUTH needs TLS) until the server was restarted. A renewal half
// written, a new certificate beside the old key, leaves the last good one
// served.
func TestSMTPCertificateRenewedOnDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := smtpInConfig{listen: "127.0.0.1:0", domain: "sms.test", maxConns: 100, perIP: 10,
		certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem")}
	first := writeCertPair(t, c.certFile, c.keyFile, time.Now().Add(-time.Hour))
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if got := servedCert(t, c.tls); !bytes.Equal(got, first.Certificate[0]) {
		t.Fatal("the certificate served is not the one of the files")
	}

	renewed := writeCertPair(t, c.certFile, c.keyFile, time.Now())
	if got := servedCert(t, c.tls); !bytes.Equal(got, renewed.Certificate[0]) {
		t.Error("the certificate renewed on disk is not served: still the one read at the start")
	}

	// Half written: a third certificate, its key not yet there.
	third, _, err := mailtest.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, c.certFile, "CERTIFICATE", third.Certificates[0].Certificate[0], time.Now().Add(time.Hour))
	if got := servedCert(t, c.tls); !bytes.Equal(got, renewed.Certificate[0]) {
		t.Error("a certificate beside a key not its own: the last good certificate should be served")
	}
}

// writeCertPair writes a new self-signed certificate and its key, dated
// mod (so that a file system's coarse clock cannot hide the change).
func writeCertPair(t *testing.T, certFile, keyFile string, mod time.Time) tls.Certificate {
	t.Helper()
	server, _, err := mailtest.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	cert := server.Certificates[0]
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER, mod)
	writePEM(t, certFile, "CERTIFICATE", cert.Certificate[0], mod)
	return cert
}

func writePEM(t *testing.T, file, typ string, der []byte, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// servedCert is the certificate a TLS handshake with the server's
// configuration presents, over loopback.
func servedCert(t *testing.T, server *tls.Config) []byte {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_ = tls.Server(c, server).Handshake()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Raw
}
