package management

import (
	"log/slog"
	"net"
	"strconv"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/cluster/node"
)

// NodeConfig is the management API's configuration for n, served at
// self (the management listener's address, https when tls).
func NodeConfig(n *node.Node, version string, self net.Addr, tls bool, log *slog.Logger) Config {
	amqpAddr := loopbackIfUnspecified(n.AMQPAddr())
	listeners := []Listener{listenerOf("amqp", n.AMQPAddr())}
	if a := n.AMQPSAddr(); a != nil {
		listeners = append(listeners, listenerOf("amqp/ssl", a))
	}
	if self != nil {
		proto := "http"
		if tls {
			proto = "https"
		}
		listeners = append(listeners, listenerOf(proto, self))
	}
	svc, users := n.OperatorAPI()
	return Config{
		Admin:       svc,
		Users:       users,
		AMQPAddr:    amqpAddr,
		Version:     version,
		ClusterName: n.ClusterName,
		Listeners:   listeners,
		// cmd/warren sets the node's --login-failure-delay.
		LoginFailureDelay: server.DefaultLoginFailureDelay,
		Log:               log,
	}
}

func listenerOf(protocol string, a net.Addr) Listener {
	l := Listener{Protocol: protocol}
	if t, ok := a.(*net.TCPAddr); ok {
		l.IP, l.Port = t.IP.String(), t.Port
	}
	return l
}

// loopbackIfUnspecified is where to dial a listener bound to a (maybe
// unspecified) address from this host.
func loopbackIfUnspecified(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := t.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(t.Port))
}
