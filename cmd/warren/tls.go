package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/pki"
)

// tlsWatchInterval is how often the node looks for rotated TLS files.
const tlsWatchInterval = 5 * time.Second

// securityFlags are the node's TLS and hostile-client settings, RabbitMQ's
// listeners.ssl and ssl_options.* under Warren's names.
type securityFlags struct {
	cert, key, ca     string
	amqpsAddr         string
	verify            string
	failIfNoPeerCert  bool
	certLoginFrom     string
	insecureCluster   bool
	clusterTLS        bool
	maxHandshakes     int
	loginFailureDelay time.Duration
	adminAddr         string
}

func (s *securityFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&s.cert, "tls-cert", "", "PEM certificate (chain) of this node, for AMQPS and, on a cluster member, mutual TLS with its peers (ssl_options.certfile); `warrenctl certs node` makes one")
	fs.StringVar(&s.key, "tls-key", "", "PEM private key of --tls-cert (ssl_options.keyfile)")
	fs.StringVar(&s.ca, "tls-ca", "", "PEM bundle of the CAs whose certificates clients and peers must present (ssl_options.cacertfile); the cluster CA's ca.pem")
	fs.StringVar(&s.amqpsAddr, "amqps", "", "AMQP over TLS listen address, e.g. :5671 (listeners.ssl.default); needs --tls-cert, --tls-key and --tls-ca")
	fs.StringVar(&s.verify, "tls-verify", "verify_peer", "AMQPS clients' certificates: verify_peer checks one when presented (EXTERNAL needs it), verify_none asks for none (ssl_options.verify)")
	fs.BoolVar(&s.failIfNoPeerCert, "tls-fail-if-no-peer-cert", false, "with verify_peer, refuse AMQPS clients that present no certificate (ssl_options.fail_if_no_peer_cert)")
	fs.StringVar(&s.certLoginFrom, "ssl-cert-login-from", string(server.LoginFromCommonName), "the part of a client certificate EXTERNAL logs in with: common_name, distinguished_name or subject_alternative_name")
	fs.BoolVar(&s.clusterTLS, "cluster-tls", true, "on a cluster member with --tls-cert, use it for mutual TLS between the nodes and for warrenctl too; false keeps the internal port plaintext (a loopback-only node, as make run's)")
	fs.BoolVar(&s.insecureCluster, "insecure-cluster", false, "let a node whose internal or gossip address is not loopback run without TLS and a gossip key: anyone who reaches those ports can then read and change everything")
	fs.StringVar(&s.adminAddr, "admin-addr", "", "on a standalone node (no --internal-addr), serve warrenctl here, e.g. 127.0.0.1:25672 (a cluster member serves it on --internal-addr); with --tls-cert it is TLS, and operators authenticate as on a cluster")
	fs.IntVar(&s.maxHandshakes, "max-handshakes", server.DefaultMaxHandshakes, "connections in their AMQP handshake (not yet logged in) at once; one over it is closed at once; 0: no cap")
	fs.DurationVar(&s.loginFailureDelay, "login-failure-delay", server.DefaultLoginFailureDelay, "after a failed login, a source address's next login waits this long, doubling per failure up to 5s; 0: off")
}

func (s *securityFlags) hasTLS() bool { return s.cert != "" || s.key != "" || s.ca != "" }

func (s *securityFlags) validate(c *config) error {
	if s.hasTLS() && (s.cert == "" || s.key == "" || s.ca == "") {
		return errors.New("--tls-cert, --tls-key and --tls-ca go together")
	}
	if s.amqpsAddr != "" && !s.hasTLS() {
		return errors.New("--amqps needs --tls-cert, --tls-key and --tls-ca")
	}
	if s.verify != "verify_peer" && s.verify != "verify_none" {
		return fmt.Errorf("--tls-verify must be verify_peer or verify_none, not %q", s.verify)
	}
	if _, err := server.ParseLoginFrom(s.certLoginFrom); err != nil {
		return fmt.Errorf("--ssl-cert-login-from: %w", err)
	}
	if s.adminAddr != "" && c.internalAddr != "" {
		return errors.New("--admin-addr is for a standalone node: a cluster member serves warrenctl on --internal-addr")
	}
	if s.maxHandshakes < 0 || s.loginFailureDelay < 0 {
		return errors.New("--max-handshakes and --login-failure-delay must not be negative")
	}
	if c.internalAddr == "" || s.insecureCluster {
		return nil
	}
	exposed := !isLoopbackAddr(c.internalAddr) || !isLoopbackAddr(c.gossipAddr) ||
		(c.advertiseAddr != "" && !isLoopbackAddr(c.advertiseAddr))
	if exposed && (!s.hasTLS() || !s.clusterTLS || c.gossipKey == "") {
		return errors.New("a cluster member whose internal or gossip address is not loopback needs --tls-cert, --tls-key, --tls-ca (mutual TLS between nodes) and --gossip-key; `warrenctl certs` makes the certificates (docs/security.md); --insecure-cluster runs without them")
	}
	return nil
}

// isLoopbackAddr reports whether a listen address binds loopback only.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loadTLS reads the node's TLS material, nil without any.
func (s *securityFlags) loadTLS(log *slog.Logger) (*pki.Store, error) {
	if !s.hasTLS() {
		return nil, nil
	}
	return pki.Load(pki.Files{Cert: s.cert, Key: s.key, CA: s.ca}, log.With("component", "tls"))
}

// apply puts the security settings into the node's configuration.
func (s *securityFlags) apply(nc *node.Config, store *pki.Store, log *slog.Logger) {
	nc.Server.MaxHandshakes = s.maxHandshakes
	nc.Server.LoginFailureDelay = s.loginFailureDelay
	nc.Server.CertLoginFrom = server.LoginFrom(s.certLoginFrom)
	nc.AdminAddr, nc.AdminTLS, nc.Version = s.adminAddr, store, version
	if store == nil {
		if nc.Cluster != nil && s.insecureCluster {
			log.Warn("running a cluster member without TLS (--insecure-cluster): whoever reaches its internal and gossip ports can read and change everything")
		}
		return
	}
	if s.amqpsAddr != "" {
		auth := tls.NoClientCert
		switch {
		case s.verify == "verify_peer" && s.failIfNoPeerCert:
			auth = tls.RequireAndVerifyClientCert
		case s.verify == "verify_peer":
			auth = tls.VerifyClientCertIfGiven
		}
		nc.AMQPSAddr = s.amqpsAddr
		nc.AMQPTLS = store.ServerConfig(auth)
	}
	if nc.Cluster != nil && s.clusterTLS {
		nc.Cluster.TLS = store
	}
}
