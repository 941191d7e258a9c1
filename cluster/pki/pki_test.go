package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"github.com/warrenmq/warren/raftq/testwait"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newCA makes a CA in a temporary folder.
func newCA(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := InitCA(dir, name); err != nil {
		t.Fatal(err)
	}
	return dir
}

func issue(t *testing.T, caDir string, req Request) Files {
	t.Helper()
	cert, key, err := Issue(caDir, t.TempDir(), req)
	if err != nil {
		t.Fatal(err)
	}
	return Files{Cert: cert, Key: key, CA: filepath.Join(caDir, CACertFile)}
}

func TestInitCARefusesToReplaceACA(t *testing.T) {
	dir := newCA(t, "test")
	if err := InitCA(dir, "again"); err == nil {
		t.Fatal("a second CA replaced the first")
	}
}

func TestNodeCertificateNamesItsNode(t *testing.T) {
	ca := newCA(t, "test")
	f := issue(t, ca, Request{Kind: Node, Name: "warren@host-1", Hosts: []string{"host-1", "10.0.0.1"}})
	s, err := Load(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	name, err := VerifyNode([]*x509.Certificate{s.Leaf()}, s.Pool(), x509.ExtKeyUsageServerAuth)
	if err != nil || name != "warren@host-1" {
		t.Fatalf("VerifyNode = %q, %v", name, err)
	}
	if _, err := VerifyNode([]*x509.Certificate{s.Leaf()}, s.Pool(), x509.ExtKeyUsageClientAuth); err != nil {
		t.Fatalf("a node certificate must also authenticate its node as a client: %v", err)
	}
	if s.Leaf().VerifyHostname("host-1") != nil || s.Leaf().VerifyHostname("10.0.0.1") != nil || s.Leaf().VerifyHostname("localhost") != nil {
		t.Fatalf("hosts missing: %v %v", s.Leaf().DNSNames, s.Leaf().IPAddresses)
	}
	if info, _ := os.Stat(f.Key); info.Mode().Perm() != 0o600 {
		t.Fatalf("key readable by others: %v", info.Mode())
	}
}

func TestClientCertificateIsNoNode(t *testing.T) {
	ca := newCA(t, "test")
	f := issue(t, ca, Request{Kind: Client, Name: "alice"})
	s, err := Load(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyNode([]*x509.Certificate{s.Leaf()}, s.Pool(), x509.ExtKeyUsageClientAuth); err == nil {
		t.Fatal("a client certificate passed for a node")
	}
	if s.Leaf().Subject.CommonName != "alice" {
		t.Fatalf("CN %q", s.Leaf().Subject.CommonName)
	}
}

func TestVerifyNodeRefusesAnotherCAAndAnExpiredCertificate(t *testing.T) {
	ours, theirs := newCA(t, "ours"), newCA(t, "theirs")
	pool, err := Load(issue(t, ours, Request{Kind: Node, Name: "n1"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := Load(issue(t, theirs, Request{Kind: Node, Name: "n1"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyNode([]*x509.Certificate{stranger.Leaf()}, pool.Pool(), x509.ExtKeyUsageServerAuth); err == nil {
		t.Fatal("a certificate from another CA was accepted")
	}
	expired, err := Load(issue(t, ours, Request{Kind: Node, Name: "n1", NotBefore: time.Now().Add(-48 * time.Hour), Validity: time.Hour}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyNode([]*x509.Certificate{expired.Leaf()}, pool.Pool(), x509.ExtKeyUsageServerAuth); err == nil {
		t.Fatal("an expired certificate was accepted")
	}
}

// TestStoreWatchPicksUpARotation replaces a listener's certificate on
// disk while a connection made with the old one stays open: new
// handshakes see the new certificate, the old connection keeps working.
func TestStoreWatchPicksUpARotation(t *testing.T) {
	ca := newCA(t, "test")
	dir := t.TempDir()
	cert, key, err := Issue(ca, dir, Request{Kind: Node, Name: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	files := Files{Cert: cert, Key: key, CA: filepath.Join(ca, CACertFile)}
	s, err := Load(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Watch(ctx, 10*time.Millisecond)

	ln := listen(t, s, func(c net.Conn) { io.Copy(c, c) }) // echo
	dial := func() (*tls.Conn, *x509.Certificate) {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), s.NodeClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		return c, c.ConnectionState().PeerCertificates[0]
	}
	old, first := dial()
	defer old.Close()

	if _, _, err := Issue(ca, dir, Request{Kind: Node, Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the rotated certificate to be loaded", func() bool {
		return s.Leaf().SerialNumber.Cmp(first.SerialNumber) != 0
	})
	c, second := dial()
	c.Close()
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("a new handshake still got the old certificate")
	}
	if _, err := old.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(old, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("the connection made before the rotation broke: %q %v", buf, err)
	}
}

func TestServerRefusesPlainTCPAndStrangers(t *testing.T) {
	ca, other := newCA(t, "ours"), newCA(t, "theirs")
	s, err := Load(issue(t, ca, Request{Kind: Node, Name: "n1"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := Load(issue(t, other, Request{Kind: Node, Name: "n1"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t, s, func(c net.Conn) {
		c.(*tls.Conn).Handshake()
		c.Close()
	})
	// A client of another CA: it refuses our server, and ours would
	// refuse it.
	if c, err := tls.Dial("tcp", ln.Addr().String(), stranger.NodeClientConfig()); err == nil {
		c.Close()
		t.Fatal("a client trusting another CA completed a handshake")
	}
	// A client that skips verifying us but presents another CA's
	// certificate: our server refuses it.
	cfg := stranger.NodeClientConfig()
	cfg.VerifyConnection = nil
	c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
	if err == nil {
		_, err = c.Read(make([]byte, 1)) // TLS 1.3: the refusal comes after the client's handshake
		c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a stranger's certificate was not refused: %v", err)
	}
	// Plain TCP: the server answers no AMQP, only a TLS alert or nothing.
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte("AMQP\x00\x00\x09\x01"))
	raw.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 8)
	n, _ := raw.Read(buf)
	if n > 0 && string(buf[:4]) == "AMQP" {
		t.Fatal("plain TCP got a protocol header back")
	}
}

// listen serves TLS with s's material, requiring client certificates, and
// hands each accepted connection to serve on a goroutine of its own. The
// listener closes when the test ends.
func listen(t *testing.T, s *Store, serve func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.ServerConfig(tls.RequireAndVerifyClientCert))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln
}
