package server_test

import (
	"github.com/warrenmq/warren/raftq/testwait"
	"io"
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp/server"
)

// TestHandshakeCap holds the node's handshake slots with connections that
// never log in: the next connection is closed at once, and a slot freed
// lets a real client in.
func TestHandshakeCap(t *testing.T) {
	tn := startNode(t, withServer(func(c *server.Config) { c.MaxHandshakes = 2 }))
	var idle []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", tn.AMQPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	// The two idle connections must be accepted before the third one
	// arrives; a connection the node has accepted answers a bad header.
	for _, c := range idle {
		c.Write([]byte("AMQP"))
	}
	testwait.For(t, 5*time.Second, "a connection over the handshake cap to be closed at once", func() bool {
		c, err := net.Dial("tcp", tn.AMQPAddr().String())
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(time.Second))
		_, err = c.Read(make([]byte, 1))
		return err == io.EOF
	})

	idle[0].Close()
	testwait.For(t, 5*time.Second, "a client to log in once a handshake slot is free", func() bool {
		c, err := amqp091.Dial(tn.url("guest", "guest", "/"))
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// TestFailedLoginsSlowTheirSource: after failed logins, the next login
// from the same address waits, even with the right password.
func TestFailedLoginsSlowTheirSource(t *testing.T) {
	const delay = 100 * time.Millisecond
	tn := startNode(t, withServer(func(c *server.Config) { c.LoginFailureDelay = delay }))
	for i := 0; i < 3; i++ {
		if c, err := amqp091.Dial(tn.url("guest", "wrong", "/")); err == nil {
			c.Close()
			t.Fatal("a wrong password logged in")
		}
	}
	start := time.Now()
	c, err := amqp091.Dial(tn.url("guest", "guest", "/"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// Three failures: the fourth attempt waits 100 ms doubled twice.
	if took := time.Since(start); took < 4*delay {
		t.Fatalf("the login after three failures took %v, want at least %v", took, 4*delay)
	}
}
