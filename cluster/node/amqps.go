package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// listenAMQPS opens the AMQPS listener when the node has one: TCP with
// TLS on top, whose handshake the AMQP server completes for each
// connection within its handshake timeout.
func listenAMQPS(cfg Config) (net.Listener, error) {
	if cfg.AMQPSAddr == "" {
		return nil, nil
	}
	if cfg.AMQPTLS == nil {
		return nil, errors.New("an AMQPS listener needs TLS material (--tls-cert, --tls-key, --tls-ca)")
	}
	ln, err := net.Listen("tcp", cfg.AMQPSAddr)
	if err != nil {
		return nil, fmt.Errorf("listen for AMQPS on %s: %w", cfg.AMQPSAddr, err)
	}
	return tls.NewListener(ln, cfg.AMQPTLS), nil
}

func closeListener(ln net.Listener) {
	if ln != nil {
		ln.Close()
	}
}

// AMQPSAddr is the address of the AMQPS listener, nil without one.
func (n *Node) AMQPSAddr() net.Addr {
	if n.tlsLn == nil {
		return nil
	}
	return n.tlsLn.Addr()
}
