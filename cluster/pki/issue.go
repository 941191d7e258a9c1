// Package pki makes and reads the certificates that secure a cluster: a
// cluster CA, a certificate per node (whose identity other nodes check
// against the name the node claims), and client certificates for
// applications (AMQPS with EXTERNAL) and operators (warrenctl). It is what
// `warrenctl certs` runs, so a development cluster needs no other tool;
// production clusters may use their own PKI instead, as long as node
// certificates carry the node's identity (NodeURI).
//
// Keys are ECDSA P-256, written as PKCS#8 PEM readable only by their owner.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The files of a certificate folder.
const (
	CACertFile = "ca.pem"
	CAKeyFile  = "ca-key.pem"
)

// Default validity periods.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 2 * 365 * 24 * time.Hour
)

// nodeURIScheme marks a node's identity in its certificate's URI SANs:
// warren-node:NAME. A URI carries any node name ("warren@host" is not a
// DNS name), and no public CA issues one, so a certificate from another
// PKI cannot pass for a node by accident.
const nodeURIScheme = "warren-node"

// NodeURI is the URI SAN naming node name.
func NodeURI(name string) *url.URL {
	return &url.URL{Scheme: nodeURIScheme, Opaque: url.PathEscape(name)}
}

// NodeName returns the node identity a certificate carries, if any.
func NodeName(cert *x509.Certificate) (string, bool) {
	for _, u := range cert.URIs {
		if u.Scheme == nodeURIScheme {
			name, err := url.PathUnescape(u.Opaque)
			return name, err == nil && name != ""
		}
	}
	return "", false
}

// Kind says what a certificate is for.
type Kind int

const (
	// Node: a cluster node, serving and dialing its peers (server and
	// client authentication), named by NodeURI and by its hosts.
	Node Kind = iota
	// Client: an application or operator; its common name is the user
	// name EXTERNAL logs in as.
	Client
)

// Request is a certificate to issue.
type Request struct {
	Kind Kind
	// Name is the node's name (Node) or the user's (Client): the
	// certificate's common name.
	Name string
	// Hosts are the DNS names and IP addresses a node is reached at
	// (Node only; localhost and 127.0.0.1 are always added).
	Hosts []string
	// Validity is how long the certificate is valid (LeafValidity when 0).
	Validity time.Duration
	// NotBefore backdates the certificate (tests use it to make expired
	// ones); zero is now, less a minute of clock skew.
	NotBefore time.Time
}

// InitCA writes a new CA into dir. It refuses to replace an existing one:
// every certificate issued from it would stop being trusted.
func InitCA(dir, name string) error {
	if _, err := os.Stat(filepath.Join(dir, CAKeyFile)); err == nil {
		return fmt.Errorf("%s already holds a CA (%s); remove it first to make a new one", dir, CAKeyFile)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Warren"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, CAKeyFile), key); err != nil {
		return err
	}
	return writeCert(filepath.Join(dir, CACertFile), der)
}

// Issue signs req with the CA in caDir and writes NAME.pem and
// NAME-key.pem into outDir (NAME made safe for a file name). It returns
// the two paths.
func Issue(caDir, outDir string, req Request) (certPath, keyPath string, err error) {
	if req.Name == "" {
		return "", "", errors.New("a certificate needs a name")
	}
	caCert, caKey, err := loadCA(caDir)
	if err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl, err := template(req)
	if err != nil {
		return "", "", err
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return "", "", err
	}
	stem := filepath.Join(outDir, FileStem(req.Name))
	certPath, keyPath = stem+".pem", stem+"-key.pem"
	if err := writeKey(keyPath, key); err != nil {
		return "", "", err
	}
	return certPath, keyPath, writeCert(certPath, der)
}

// FileStem is the file name Issue gives a certificate for name.
func FileStem(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, name)
}

func template(req Request) (*x509.Certificate, error) {
	validity := req.Validity
	if validity == 0 {
		validity = LeafValidity
	}
	notBefore := req.NotBefore
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Minute)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: req.Name},
		NotBefore:    notBefore,
		NotAfter:     notBefore.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	switch req.Kind {
	case Node:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.URIs = []*url.URL{NodeURI(req.Name)}
		for _, h := range append([]string{"localhost", "127.0.0.1", "::1"}, req.Hosts...) {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	case Client:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		return nil, fmt.Errorf("unknown certificate kind %d", req.Kind)
	}
	return tmpl, nil
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certs, err := ReadCertificates(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, nil, fmt.Errorf("read the CA: %w (make one with `warrenctl certs init`)", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("read the CA's key: %w", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, nil, fmt.Errorf("%s holds no PEM key", filepath.Join(dir, CAKeyFile))
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("the CA's key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("the CA's key is not an ECDSA key")
	}
	return certs[0], key, nil
}

// ReadCertificates reads every certificate of a PEM file.
func ReadCertificates(path string) ([]*x509.Certificate, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, raw = pem.Decode(raw)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s holds no certificate", path)
	}
	return certs, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func writeCert(path string, der []byte) error {
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// writeFile replaces path whole, so that a node re-reading it never sees
// half a file.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
