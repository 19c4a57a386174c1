// Package certfile serves a TLS certificate from its PEM files and reads
// them again when they change, so that a certificate renewed on disk (by
// certbot, say, every 60 days) is the one served without a restart.
package certfile

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
)

// Pair is a certificate (chain) file and its private key file.
type Pair struct {
	certFile, keyFile string

	mu    sync.Mutex
	cert  *tls.Certificate
	stamp stamp // of the files the certificate was read from
}

// stamp tells a file's version: its modification time and size, of both files.
type stamp struct {
	certMod, keyMod   int64 // UnixNano
	certSize, keySize int64
}

// Load reads the pair; the error says what is wrong with it.
func Load(certFile, keyFile string) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile}
	st, err := p.stat()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	p.cert, p.stamp = &cert, st
	return p, nil
}

func (p *Pair) stat() (stamp, error) {
	c, err := os.Stat(p.certFile)
	if err != nil {
		return stamp{}, fmt.Errorf("certificate: %w", err)
	}
	k, err := os.Stat(p.keyFile)
	if err != nil {
		return stamp{}, fmt.Errorf("key: %w", err)
	}
	return stamp{certMod: c.ModTime().UnixNano(), keyMod: k.ModTime().UnixNano(), certSize: c.Size(), keySize: k.Size()}, nil
}

// GetCertificate is tls.Config's: the certificate of the files as they are
// now. Files that changed are read again (two stats a handshake tell); a
// pair that does not load (a renewal half written: a new certificate
// beside the old key) leaves the last good certificate served, and is
// tried again at the next handshake.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, err := p.stat(); err == nil && st != p.stamp {
		if cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile); err == nil {
			p.cert, p.stamp = &cert, st
		}
	}
	return p.cert, nil
}
