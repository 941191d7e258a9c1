package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Files name one listener's or one node's TLS material: its certificate
// chain, its key, and the CA bundle its peers' certificates must chain to.
type Files struct {
	Cert, Key, CA string
}

// Store holds TLS material read from Files and reads it again when asked
// (SIGHUP) or when the files change (Watch). Connections already open keep
// the material they were made with; new handshakes use the new one, so a
// rotation drops no connection.
type Store struct {
	files Files
	log   *slog.Logger

	cur atomic.Pointer[material]

	mu    sync.Mutex // serializes reloads
	stamp string     // the files' sizes and modification times at the last load
}

type material struct {
	cert *tls.Certificate
	leaf *x509.Certificate
	pool *x509.CertPool
}

// Load reads files into a new Store.
func Load(files Files, log *slog.Logger) (*Store, error) {
	if files.Cert == "" || files.Key == "" || files.CA == "" {
		return nil, errors.New("TLS needs a certificate, its key and a CA bundle")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{files: files, log: log}
	m, stamp, err := s.read()
	if err != nil {
		return nil, err
	}
	s.cur.Store(m)
	s.stamp = stamp
	return s, nil
}

// Reload reads the files again. On an error the material in use stays.
func (s *Store) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked()
}

func (s *Store) reloadLocked() error {
	m, stamp, err := s.read()
	if err != nil {
		return err
	}
	s.cur.Store(m)
	s.stamp = stamp
	s.log.Info("TLS material loaded", "cert", s.files.Cert, "subject", m.leaf.Subject.CommonName,
		"not_after", m.leaf.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// Watch reloads the material whenever the files' sizes or modification
// times change, looking every interval, until ctx is done. A reload that
// fails (a key written before its certificate) is tried again at the next
// look.
func (s *Store) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		if stamp := s.stampNow(); stamp != s.stamp {
			if err := s.reloadLocked(); err != nil {
				s.log.Warn("TLS material changed on disk but could not be loaded; keeping the old", "err", err)
			}
		}
		s.mu.Unlock()
	}
}

// Leaf is the certificate in use.
func (s *Store) Leaf() *x509.Certificate { return s.cur.Load().leaf }

func (s *Store) read() (*material, string, error) {
	stamp := s.stampNow()
	cert, err := tls.LoadX509KeyPair(s.files.Cert, s.files.Key)
	if err != nil {
		return nil, "", fmt.Errorf("load the certificate and key: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, "", err
	}
	cert.Leaf = leaf
	pool, err := readPool(s.files.CA)
	if err != nil {
		return nil, "", err
	}
	return &material{cert: &cert, leaf: leaf, pool: pool}, stamp, nil
}

func (s *Store) stampNow() string {
	stamp := ""
	for _, p := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		if fi, err := os.Stat(p); err == nil {
			stamp += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return stamp
}

// ServerConfig is a listener's TLS configuration: TLS 1.2 at least (1.3
// is chosen whenever the client offers it), the current certificate, and
// client certificates checked against the current CA bundle as auth says.
// nextProtos are the ALPN protocols served ("h2" for gRPC).
func (s *Store) ServerConfig(auth tls.ClientAuthType, nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.cur.Load()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   nextProtos,
				Certificates: []tls.Certificate{*m.cert},
				ClientAuth:   auth,
				ClientCAs:    m.pool,
			}, nil
		},
	}
}

// NodeClientConfig is the configuration a node (or warrenctl) dials a
// node with: it presents the current certificate and accepts only a
// server whose certificate chains to the current CA bundle and names a
// node (NodeURI). Host names are not checked: nodes are dialed by the
// addresses gossip announces, and what matters is that the peer is one of
// the cluster's nodes; which one it claims to be is checked where it
// claims it.
func (s *Store) NodeClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
		// Verification is VerifyConnection's, against the CA bundle in use
		// now rather than the one at dial time.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := VerifyNode(cs.PeerCertificates, s.cur.Load().pool, x509.ExtKeyUsageServerAuth)
			return err
		},
	}
}

// VerifyNode checks that chain (leaf first) chains to pool for usage and
// that its leaf names a node; it returns the node's name.
func VerifyNode(chain []*x509.Certificate, pool *x509.CertPool, usage x509.ExtKeyUsage) (string, error) {
	if len(chain) == 0 {
		return "", errors.New("no certificate presented")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return "", err
	}
	name, ok := NodeName(chain[0])
	if !ok {
		return "", fmt.Errorf("certificate %q names no node", chain[0].Subject.CommonName)
	}
	return name, nil
}

// Pool is the CA bundle in use.
func (s *Store) Pool() *x509.CertPool { return s.cur.Load().pool }

// OperatorClientConfig is warrenctl's TLS configuration: it accepts only a
// server whose certificate chains to files.CA and names a node, and
// presents files' client certificate when it has one (without, the
// operator sends a user's password instead).
func OperatorClientConfig(files Files) (*tls.Config, error) {
	pool, err := readPool(files.CA)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // VerifyConnection checks the chain and the node's identity
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := VerifyNode(cs.PeerCertificates, pool, x509.ExtKeyUsageServerAuth)
			return err
		},
	}
	if files.Cert != "" {
		cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			return nil, fmt.Errorf("load the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// readPool reads a PEM CA bundle into a pool.
func readPool(path string) (*x509.CertPool, error) {
	cas, err := ReadCertificates(path)
	if err != nil {
		return nil, fmt.Errorf("load the CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	return pool, nil
}
