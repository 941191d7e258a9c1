package main

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const (
	dialTimeout  = 10 * time.Second
	closeTimeout = 3 * time.Second
)

// dial opens one connection named after its role ("producer 3"), so it can be told apart in
// the broker's connection list. Errors name the role and the (password-redacted) URI.
// With batch (--batch-writes) the socket is a batchConn.
func dial(uri, role string, batch bool) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("warren-perf " + role)
	netDial := amqp.DefaultDial(dialTimeout)
	if batch {
		plain := netDial
		netDial = func(network, addr string) (net.Conn, error) {
			c, err := plain(network, addr)
			if err != nil {
				return nil, err
			}
			return newBatchConn(c), nil
		}
	}
	conn, err := amqp.DialConfig(uri, amqp.Config{
		Properties: props,
		Heartbeat:  10 * time.Second,
		Dial:       netDial,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: cannot connect to %s: %w", role, redactURI(uri), err)
	}
	return conn, nil
}

// closeConn closes with a deadline: the deadline also unblocks a publisher stuck writing to a
// broker that stopped reading (flow control, alarm), so shutdown never hangs on the socket.
func closeConn(c *amqp.Connection) {
	if c != nil && !c.IsClosed() {
		_ = c.CloseDeadline(time.Now().Add(closeTimeout))
	}
}

// dialAll opens n connections in parallel (slow handshakes add up with hundreds of clients).
// Connection i uses uris[i mod len(uris)]. On any failure all opened connections are closed.
func dialAll(uris []string, n int, role string, batch bool) ([]*amqp.Connection, error) {
	conns := make([]*amqp.Connection, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			conns[i], errs[i] = dial(uris[i%len(uris)], fmt.Sprintf("%s %d", role, i+1), batch)
		})
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		closeAll(conns)
		return nil, err
	}
	return conns, nil
}

// firstErr returns the first non-nil error: with 100 producers and the broker down, one line
// says it all.
func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// setupQueues declares every queue (or, with --predeclared, checks it exists). Queue k is
// declared through uris[k mod len(uris)]: brokers that place a new queue's leader on the node
// that received the declare (RabbitMQ's client-local locator) then spread leaders over nodes.
func setupQueues(cfg *Config) error {
	return forEachQueue(cfg, "setup", func(ch *amqp.Channel, name string) error {
		if cfg.Predeclared {
			if _, err := ch.QueueDeclarePassive(name, cfg.Durable(), false, false, false, nil); err != nil {
				return fmt.Errorf("queue %q (--predeclared) not usable: %w", name, err)
			}
			return nil
		}
		if _, err := ch.QueueDeclare(name, cfg.Durable(), false, false, false, cfg.DeclareArgs()); err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed {
				return fmt.Errorf("declare queue %q: %w\n(it exists with other properties: delete it, or pass --predeclared to use it as is)", name, err)
			}
			return fmt.Errorf("declare queue %q: %w", name, err)
		}
		return nil
	})
}

// deleteQueues deletes every queue (--delete).
func deleteQueues(cfg *Config) error {
	return forEachQueue(cfg, "cleanup", func(ch *amqp.Channel, name string) error {
		if _, err := ch.QueueDelete(name, false, false, false); err != nil {
			return fmt.Errorf("delete queue %q: %w", name, err)
		}
		return nil
	})
}

// forEachQueue runs fn for queue k on a fresh channel of a connection to uris[k mod len]. A
// fresh channel per queue because a failed declare closes the channel.
func forEachQueue(cfg *Config, role string, fn func(ch *amqp.Channel, name string) error) error {
	conns := map[string]*amqp.Connection{}
	defer func() {
		for _, c := range conns {
			closeConn(c)
		}
	}()
	for k, name := range cfg.QueueNames() {
		uri := cfg.URIs[k%len(cfg.URIs)]
		conn := conns[uri]
		if conn == nil {
			var err error
			if conn, err = dial(uri, role, cfg.BatchWrites); err != nil {
				return err
			}
			conns[uri] = conn
		}
		ch, err := conn.Channel()
		if err != nil {
			return fmt.Errorf("open channel on %s: %w", redactURI(uri), err)
		}
		err = fn(ch, name)
		if err != nil {
			return err
		}
		_ = ch.Close()
	}
	return nil
}
