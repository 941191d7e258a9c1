package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/warrenmq/warren/cluster/pki"
	"github.com/warrenmq/warren/membership"
)

// proveWait bounds one identity check of a node gossip found.
const proveWait = 3 * time.Second

// proven checks, before a node gossip found is admitted to the metadata
// group (and so to any queue's group), that it is who it claims to be:
// the node answering at its internal address must present a node
// certificate from the cluster CA naming it. Gossip alone proves nothing
// (a key, if any, is shared by every node); without TLS nothing can be
// proven and every node is taken at its word.
func (c *clusterNode) proven(m membership.Member) error {
	if c.cfg.TLS == nil {
		return nil
	}
	cfg := c.cfg.TLS.NodeClientConfig()
	cfg.NextProtos = []string{"h2"}
	verify := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if err := verify(cs); err != nil {
			return err
		}
		if name, _ := pki.NodeName(cs.PeerCertificates[0]); name != m.Name {
			return fmt.Errorf("the node at %s is %q, not %q as gossip says", m.Internal, name, m.Name)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), proveWait)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", m.Internal)
	if err != nil {
		return fmt.Errorf("prove node %q at %s: %w", m.Name, m.Internal, err)
	}
	return conn.Close()
}
