package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/warrenmq/warren/raftq/testwait"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/pki"
)

// testPKI is a cluster CA with a node certificate for the server and
// client certificates, in a temporary folder.
type testPKI struct {
	dir  string
	node pki.Files
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	if err := pki.InitCA(dir, "test CA"); err != nil {
		t.Fatal(err)
	}
	p := &testPKI{dir: dir}
	p.node = p.issue(t, pki.Request{Kind: pki.Node, Name: "warren@localhost"})
	return p
}

func (p *testPKI) issue(t *testing.T, req pki.Request) pki.Files {
	t.Helper()
	cert, key, err := pki.Issue(p.dir, filepath.Join(p.dir, "issued"), req)
	if err != nil {
		t.Fatal(err)
	}
	return pki.Files{Cert: cert, Key: key, CA: filepath.Join(p.dir, pki.CACertFile)}
}

// clientTLS is a client's TLS configuration trusting p's CA and, with
// f, presenting f's certificate.
func (p *testPKI) clientTLS(t *testing.T, f *pki.Files) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(p.dir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	if f != nil {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// startTLSServer starts the binary with an AMQPS listener, guest, and a
// user alice (administrator) for EXTERNAL logins.
func startTLSServer(t *testing.T, p *testPKI, extra ...string) (*serverProcess, string) {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "warren.toml")
	err := os.WriteFile(conf, []byte(`
[[vhosts]]
name = "/"

[[users]]
name = "guest"
password = "guest"
tags = ["administrator"]

[[users]]
name = "alice"
password = "not-used-by-external"
tags = ["administrator"]

[[permissions]]
user = "guest"
vhost = "/"
configure = ".*"
write = ".*"
read = ".*"

[[permissions]]
user = "alice"
vhost = "/"
configure = ".*"
write = ".*"
read = ".*"
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	amqps := freeAddr(t)
	env := append([]string{
		"WARREN_CONFIG=" + conf,
		"WARREN_AMQPS=" + amqps,
		"WARREN_TLS_CERT=" + p.node.Cert,
		"WARREN_TLS_KEY=" + p.node.Key,
		"WARREN_TLS_CA=" + p.node.CA,
	}, extra...)
	proc := startServer(t, t.TempDir(), freeAddr(t), env...)
	waitListening(t, amqps)
	return proc, amqps
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	testwait.ForNil(t, 10*time.Second, "a listener on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// publishAndConsume publishes n messages with confirms to a quorum queue
// and consumes them back.
func publishAndConsume(t *testing.T, c *amqp091.Connection, queue string, n int) {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
	for i := 0; i < n; i++ {
		if err := ch.PublishWithContext(context.Background(), "", queue, false, false, amqp091.Publishing{Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		select {
		case cf := <-confirms:
			if !cf.Ack {
				t.Fatalf("publish %d nacked", cf.DeliveryTag)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d confirms", i, n)
		}
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		select {
		case d := <-deliveries:
			if string(d.Body) != fmt.Sprint(i) {
				t.Fatalf("delivery %d: %q", i, d.Body)
			}
			d.Ack(false)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d deliveries", i, n)
		}
	}
}

// TestAMQPSPublishConsumeAndExternal covers the AMQPS listener from a real
// client: a password login over TLS, an EXTERNAL login named by the client
// certificate's CN, and EXTERNAL offered only where a certificate was
// presented.
func TestAMQPSPublishConsumeAndExternal(t *testing.T) {
	p := newTestPKI(t)
	_, amqps := startTLSServer(t, p)
	alice := p.issue(t, pki.Request{Kind: pki.Client, Name: "alice"})

	plain, err := amqp091.DialTLS(fmt.Sprintf("amqps://guest:guest@%s/", amqps), p.clientTLS(t, nil))
	if err != nil {
		t.Fatalf("PLAIN over TLS: %v", err)
	}
	defer plain.Close()
	if plain.ConnectionState().Version < tls.VersionTLS12 {
		t.Fatalf("TLS version %x", plain.ConnectionState().Version)
	}
	publishAndConsume(t, plain, "tls-plain", 50)

	ext, err := amqp091.DialConfig(fmt.Sprintf("amqps://%s/", amqps), amqp091.Config{
		SASL:            []amqp091.Authentication{&amqp091.ExternalAuth{}},
		TLSClientConfig: p.clientTLS(t, &alice),
	})
	if err != nil {
		t.Fatalf("EXTERNAL: %v", err)
	}
	defer ext.Close()
	publishAndConsume(t, ext, "tls-external", 50)

	// Without a certificate EXTERNAL is not offered: amqp091-go finds no
	// mechanism in common.
	_, err = amqp091.DialConfig(fmt.Sprintf("amqps://%s/", amqps), amqp091.Config{
		SASL:            []amqp091.Authentication{&amqp091.ExternalAuth{}},
		TLSClientConfig: p.clientTLS(t, nil),
	})
	if err == nil {
		t.Fatal("EXTERNAL without a client certificate logged in")
	}
}

// TestAMQPSRefusesStrangers: a client certificate from another CA, an
// expired one, a client certificate for a user that does not exist, and a
// plain-TCP client on the TLS port are each refused.
func TestAMQPSRefusesStrangers(t *testing.T) {
	p := newTestPKI(t)
	_, amqps := startTLSServer(t, p)
	url := fmt.Sprintf("amqps://%s/", amqps)
	external := func(cfg *tls.Config) error {
		c, err := amqp091.DialConfig(url, amqp091.Config{SASL: []amqp091.Authentication{&amqp091.ExternalAuth{}}, TLSClientConfig: cfg})
		if err == nil {
			c.Close()
		}
		return err
	}

	other := newTestPKI(t)
	stranger := other.issue(t, pki.Request{Kind: pki.Client, Name: "alice"})
	cfg := p.clientTLS(t, &stranger) // trusts our server, presents another CA's certificate
	if err := external(cfg); err == nil {
		t.Error("a client certificate from another CA logged in")
	}

	expired := p.issue(t, pki.Request{Kind: pki.Client, Name: "alice", NotBefore: time.Now().Add(-72 * time.Hour), Validity: time.Hour})
	if err := external(p.clientTLS(t, &expired)); err == nil {
		t.Error("an expired client certificate logged in")
	}

	nobody := p.issue(t, pki.Request{Kind: pki.Client, Name: "mallory"})
	if err := external(p.clientTLS(t, &nobody)); err == nil {
		t.Error("a certificate for a user that does not exist logged in")
	}

	if c, err := amqp091.Dial(fmt.Sprintf("amqp://guest:guest@%s/", amqps)); err == nil {
		c.Close()
		t.Error("a plain-TCP client logged in on the TLS port")
	}
}

// TestAMQPSFailIfNoPeerCert: with --tls-fail-if-no-peer-cert, a client
// without a certificate cannot even complete the TLS handshake.
func TestAMQPSFailIfNoPeerCert(t *testing.T) {
	p := newTestPKI(t)
	_, amqps := startTLSServer(t, p, "WARREN_TLS_FAIL_IF_NO_PEER_CERT=true")
	if c, err := amqp091.DialTLS(fmt.Sprintf("amqps://guest:guest@%s/", amqps), p.clientTLS(t, nil)); err == nil {
		c.Close()
		t.Fatal("a client without a certificate logged in")
	}
	bob := p.issue(t, pki.Request{Kind: pki.Client, Name: "bob"})
	c, err := amqp091.DialTLS(fmt.Sprintf("amqps://guest:guest@%s/", amqps), p.clientTLS(t, &bob))
	if err != nil {
		t.Fatalf("a client with a certificate: %v", err)
	}
	c.Close()
}

// TestCertificateRotationUnderTraffic replaces the node's certificate on
// disk and sends SIGHUP while a client publishes: the client's connection
// stays up, and a new connection gets the new certificate.
func TestCertificateRotationUnderTraffic(t *testing.T) {
	p := newTestPKI(t)
	proc, amqps := startTLSServer(t, p)
	url := fmt.Sprintf("amqps://guest:guest@%s/", amqps)
	c, err := amqp091.DialTLS(url, p.clientTLS(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := c.ConnectionState().PeerCertificates[0].SerialNumber

	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("rotation", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	publish := func(i int) {
		t.Helper()
		if err := ch.PublishWithContext(context.Background(), "", "rotation", false, false, amqp091.Publishing{Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		select {
		case cf := <-confirms:
			if !cf.Ack {
				t.Fatalf("publish %d nacked", i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("publish %d not confirmed", i)
		}
	}
	publish(0)
	// The new certificate replaces the old files; SIGHUP loads it.
	if _, _, err := pki.Issue(p.dir, filepath.Join(p.dir, "issued"), pki.Request{Kind: pki.Node, Name: "warren@localhost"}); err != nil {
		t.Fatal(err)
	}
	if err := proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	i := 0
	// A SIGHUP is handled asynchronously: publish and dial until new
	// connections get the new certificate.
	testwait.For(t, 10*time.Second, "new connections to get the new certificate after SIGHUP", func() bool {
		i++
		publish(i)
		c2, err := amqp091.DialTLS(url, p.clientTLS(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		return c2.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(first) != 0
	})
	publish(-1) // the connection from before the rotation still works
	select {
	case <-proc.exited:
		t.Fatal("SIGHUP stopped the node")
	default:
	}
}

// TestClusterMemberOffLoopbackNeedsTLS: a cluster member whose internal
// address is not loopback refuses to start without TLS material and a
// gossip key, and says how to get them.
func TestClusterMemberOffLoopbackNeedsTLS(t *testing.T) {
	_, err := loadConfig([]string{"--internal-addr", "0.0.0.0:25672", "--gossip-addr", "0.0.0.0:7946"}, func(string) string { return "" }, os.Stderr)
	if err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("an exposed member without TLS: %v", err)
	}
	if _, err := loadConfig([]string{"--internal-addr", "0.0.0.0:25672", "--insecure-cluster"}, func(string) string { return "" }, os.Stderr); err != nil {
		t.Fatalf("--insecure-cluster: %v", err)
	}
	if _, err := loadConfig([]string{"--internal-addr", "127.0.0.1:25672", "--gossip-addr", "127.0.0.1:7946"}, func(string) string { return "" }, os.Stderr); err != nil {
		t.Fatalf("a loopback member: %v", err)
	}
}

// TestMetricsPortOnlyReads: the Prometheus port carries no credentials,
// so it must offer nothing but reads: any other method is refused (405),
// any other path is not there (404).
func TestMetricsPortOnlyReads(t *testing.T) {
	metrics := freeAddr(t)
	startServer(t, t.TempDir(), freeAddr(t), "WARREN_PROMETHEUS_ADDR="+metrics)
	waitListening(t, metrics)
	get, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", get.Status)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(m, "http://"+metrics+"/metrics", strings.NewReader("x"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /metrics: %s, want 405", m, resp.Status)
		}
	}
	for _, path := range []string{"/api/users", "/api/definitions", "/debug/pprof/"} {
		resp, err := http.Post("http://"+metrics+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %s, want 404", path, resp.Status)
		}
	}
}
