package server_test

import (
	"context"
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq/testwait"
)

// stalledConsumer is a raw AMQP client that consumes without acks and then
// stops reading its socket, like a client stuck in a long GC pause.
type stalledConsumer struct {
	t  *testing.T
	nc *net.TCPConn
	r  *wire.Reader
	w  *wire.Writer
}

func dialStalledConsumer(t *testing.T, addr, queueName string) *stalledConsumer {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	s := &stalledConsumer{t: t, nc: nc.(*net.TCPConn), r: wire.NewReader(nc), w: wire.NewWriter(nc)}
	s.w.WriteProtocolHeader()
	s.w.Flush()
	s.expect(&wire.ConnectionStart{})
	s.send(0, &wire.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	s.expect(&wire.ConnectionTune{})
	s.send(0, &wire.ConnectionTuneOk{ChannelMax: 16, FrameMax: wire.DefaultFrameMax})
	s.send(0, &wire.ConnectionOpen{VirtualHost: "/"})
	s.expect(&wire.ConnectionOpenOk{})
	s.send(1, &wire.ChannelOpen{})
	s.expect(&wire.ChannelOpenOk{})
	s.send(1, &wire.BasicConsume{Queue: queueName, ConsumerTag: "stalled", NoAck: true})
	s.expect(&wire.BasicConsumeOk{})
	return s
}

func (s *stalledConsumer) send(ch uint16, m wire.Method) {
	s.t.Helper()
	if err := s.w.WriteMethod(ch, m); err != nil {
		s.t.Fatal(err)
	}
	if err := s.w.Flush(); err != nil {
		s.t.Fatal(err)
	}
}

// expect reads the next method and checks its type.
func (s *stalledConsumer) expect(want wire.Method) wire.Method {
	s.t.Helper()
	s.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := s.r.ReadFrame()
	if err != nil {
		s.t.Fatalf("waiting for %s: %v", want.Name(), err)
	}
	m, err := wire.DecodeMethod(f.Payload)
	if err != nil || m.Name() != want.Name() {
		s.t.Fatalf("got %v (%v), want %s", m, err, want.Name())
	}
	return m
}

// countDeliveries reads until n basic.deliver frames have arrived.
func (s *stalledConsumer) countDeliveries(n int) {
	s.t.Helper()
	got := 0
	for got < n {
		s.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := s.r.ReadFrame()
		if err != nil {
			s.t.Fatalf("after %d of %d deliveries: %v", got, n, err)
		}
		if f.Type == wire.FrameMethod {
			if m, err := wire.DecodeMethod(f.Payload); err == nil && m.Name() == "basic.deliver" {
				got++
			}
		}
	}
}

// TestSlowConsumerDoesNotDrainQueueIntoMemory checks the delivery side of
// backpressure: a no-ack consumer with no prefetch limit that stops
// reading must not make the queue push its whole backlog into the
// connection's outbound buffer. The messages stay in the queue (where the
// memory alarm counts them) until the client reads again.
func TestSlowConsumerDoesNotDrainQueueIntoMemory(t *testing.T) {
	n := startNode(t)
	pub := openChannel(t, n.dial(t))
	if _, err := pub.QueueDeclare("backlog", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	stalled := dialStalledConsumer(t, n.AMQPAddr().String(), "backlog")

	const total, size = 3000, 16 << 10 // 48 MiB
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, total))
	body := make([]byte, size)
	for i := 0; i < total; i++ {
		if err := pub.PublishWithContext(context.Background(), "", "backlog", false, false, amqp091.Publishing{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < total; i++ {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatal("publish nacked")
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("publisher stalled after %d confirms: a stuck consumer must not slow publishers", i)
		}
	}

	q, err := pub.QueueDeclarePassive("backlog", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Kernel socket buffers and the 1 MiB outbox hold at most a few
	// hundred of these; the rest must still be in the queue.
	if q.Messages < total/2 {
		t.Fatalf("only %d of %d messages left in the queue: the stalled consumer's backlog went into memory", q.Messages, total)
	}

	// Reading again resumes the flow until the queue is empty.
	stalled.countDeliveries(total)
	testwait.For(t, 5*time.Second, "the queue drained after the consumer resumed", func() bool {
		q, err := pub.QueueDeclarePassive("backlog", false, false, false, false, nil)
		return err == nil && q.Messages == 0
	})
}
