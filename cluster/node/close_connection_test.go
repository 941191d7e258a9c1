package node_test

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp/server"
)

// TestClosingConnectionIsNotClosedAgain: a connection the node is already
// closing (its client has not yet answered close-ok) is not closed, nor
// counted, a second time: a retried close finds nothing to close.
func TestClosingConnectionIsNotClosedAgain(t *testing.T) {
	n := startStandalone(t)
	proxy := newHoldingProxy(t, n.AMQPAddr().String())
	c, err := amqp091.Dial("amqp://guest:guest@" + proxy.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))

	proxy.hold.Store(true) // the client's close-ok never reaches the node
	if got := n.CloseConnections(server.ConnectionFilter{User: "guest"}, "first"); len(got) != 1 {
		t.Fatalf("first close: %+v", got)
	}
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp091.ConnectionForced {
			t.Fatalf("client closed with %v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not told")
	}
	if len(n.Connections()) != 1 {
		t.Fatalf("the closing connection is not listed: %+v", n.Connections())
	}
	if got := n.CloseConnections(server.ConnectionFilter{User: "guest"}, "again"); len(got) != 0 {
		t.Fatalf("a closing connection was closed again: %+v", got)
	}
}

// holdingProxy forwards one client's TCP connection to a node; while hold
// is set it drops what the client sends.
type holdingProxy struct {
	addr string
	hold atomic.Bool
}

func newHoldingProxy(t *testing.T, target string) *holdingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &holdingProxy{addr: ln.Addr().String()}
	go func() {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		upstream, err := net.Dial("tcp", target)
		if err != nil {
			client.Close()
			return
		}
		t.Cleanup(func() { client.Close(); upstream.Close() })
		go io.Copy(client, upstream)
		buf := make([]byte, 4096)
		for {
			k, err := client.Read(buf)
			if err != nil {
				return
			}
			if !p.hold.Load() {
				upstream.Write(buf[:k])
			}
		}
	}()
	return p
}
