package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/raftq/testwait"
)

// A connection's listing shows what its client set up: who it is, its
// channels' modes and limits, what they hold unacknowledged, and their
// consumers with their basic.consume settings.
func TestConnectionsListing(t *testing.T) {
	tn := startNode(t)
	cfg := amqp091.Config{Properties: amqp091.Table{"connection_name": "billing-worker", "product": "listing-test"}}
	c, err := amqp091.DialConfig(tn.url("guest", "guest", "/"), cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	other := tn.dial(t) // a second connection, listed separately

	// Listings run beside everything below, for the race detector.
	stop := make(chan struct{})
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		for {
			select {
			case <-stop:
				return
			default:
				tn.Connections()
			}
		}
	}()
	defer func() { close(stop); <-listed }()

	pub := openChannel(t, c)
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	declareQueue(t, pub, "work")
	for range 5 {
		publishBody(t, pub, "", "work", "job")
	}

	sub := openChannel(t, c)
	if err := sub.Qos(3, 0, false); err != nil {
		t.Fatal(err)
	}
	d, err := sub.Consume("work", "worker-1", false, false, false, false, amqp091.Table{"x-priority": int32(5)})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		receive(t, d)
	}
	tx := openChannel(t, other)
	if err := tx.Tx(); err != nil {
		t.Fatal(err)
	}

	var conns []server.ConnectionInfo
	testwait.ForNil(t, 5*time.Second, "two connections, the first holding 3 unacked on its second channel", func() error {
		conns = tn.Connections()
		if len(conns) == 2 && len(conns[0].Channels) == 2 && conns[0].Channels[1].Unacked == 3 {
			return nil
		}
		return fmt.Errorf("%+v", conns)
	})

	first := conns[0]
	if first.ClientName != "billing-worker" || first.User != "guest" || first.Vhost != "/" {
		t.Errorf("first connection: name %q user %q vhost %q", first.ClientName, first.User, first.Vhost)
	}
	if !strings.Contains(first.Name, " -> "+tn.AMQPAddr().String()) {
		t.Errorf("connection name %q does not end with the server's address", first.Name)
	}
	if first.ClientProduct != "listing-test" || first.Heartbeat == 0 || first.FrameMax == 0 {
		t.Errorf("client product %q, heartbeat %v, frame max %d: want listing-test and both set", first.ClientProduct, first.Heartbeat, first.FrameMax)
	}
	if first.RecvBytes == 0 || first.SentBytes == 0 {
		t.Errorf("bytes received %d, sent %d: want both counted", first.RecvBytes, first.SentBytes)
	}
	p, s := first.Channels[0], first.Channels[1]
	if !p.Confirm || p.Transactional || p.Unconfirmed != 0 || len(p.Consumers) != 0 {
		t.Errorf("publishing channel: %+v", p)
	}
	if s.Confirm || s.Prefetch != 3 || len(s.Consumers) != 1 {
		t.Fatalf("consuming channel: %+v", s)
	}
	k := s.Consumers[0]
	if k.Queue != "work" || k.Tag != "worker-1" || !k.AckRequired || k.Prefetch != 3 || k.Priority != 5 || k.Exclusive {
		t.Errorf("consumer: %+v", k)
	}
	if second := conns[1]; len(second.Channels) != 1 || !second.Channels[0].Transactional {
		t.Errorf("second connection's channels: %+v", second.Channels)
	}

	// Closing a channel and a connection takes them out of the listing.
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	other.Close()
	testwait.ForNil(t, 5*time.Second, "one connection with one channel left", func() error {
		conns = tn.Connections()
		if len(conns) == 1 && len(conns[0].Channels) == 1 {
			return nil
		}
		return fmt.Errorf("%+v", conns)
	})
}
