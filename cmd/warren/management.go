package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/warrenmq/warren/cluster/management"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/pki"
)

// serveManagement serves RabbitMQ's management HTTP API for n on addr,
// over HTTPS with the node's certificate when it has TLS material, until
// stop; failed logins are slowed as the AMQP listener slows them.
func serveManagement(n *node.Node, addr string, tlsStore *pki.Store, loginDelay time.Duration, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for the management API: %w", err)
	}
	cfg := management.NodeConfig(n, version, ln.Addr(), tlsStore != nil, log)
	cfg.LoginFailureDelay = loginDelay
	api := management.New(cfg)
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	scheme := "http"
	if tlsStore != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tlsStore.ServerConfig(tls.NoClientCert, "http/1.1"))
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("management listener stopped", "addr", addr, "err", err)
		}
	}()
	log.Info("serving the management HTTP API", "url", scheme+"://"+ln.Addr().String()+"/api/")
	return func() { srv.Close() }, nil
}
