package server_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func TestChannelReopenAfterSoftError(t *testing.T) {
	n := startNode(t)
	// With channel_max 1 the client can only ever use channel 1, so
	// reopening proves the server freed the number after the soft close.
	c, err := amqp091.DialConfig(n.url("guest", "guest", "/"), amqp091.Config{ChannelMax: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for range 3 {
		ch := openChannel(t, c)
		_, err := ch.QueueDeclarePassive("missing", false, false, false, false, nil)
		wantError(t, err, amqp091.NotFound, "NOT_FOUND - no queue 'missing' in vhost '/'")
	}
	ch := openChannel(t, c)
	declareQueue(t, ch, "reopened")
	publishBody(t, ch, "", "reopened", "ok")
	if got := drainQueue(t, ch, "reopened"); len(got) != 1 {
		t.Fatalf("reopened channel: queue holds %q", got)
	}
	// Client-closed channels free their number too.
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	declareQueue(t, openChannel(t, c), "again")
}

func TestSoftErrorIsolation(t *testing.T) {
	n := startNode(t)
	c1 := n.dial(t)
	c2 := n.dial(t)
	bystander := openChannel(t, c1)
	declareQueue(t, bystander, "iso")
	d, err := bystander.Consume("iso", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	publishBody(t, bystander, "", "iso", "held")
	held := receive(t, d)

	failing := openChannel(t, c1)
	_, err = failing.QueueDeclarePassive("nope", false, false, false, false, nil)
	wantCode(t, err, amqp091.NotFound)
	if c1.IsClosed() {
		t.Fatal("a soft error closed the connection")
	}

	// The other channel keeps its consumer and its unacked delivery.
	if err := held.Ack(false); err != nil {
		t.Fatal(err)
	}
	publishBody(t, openChannel(t, c2), "", "iso", "from c2")
	if m := receive(t, d); string(m.Body) != "from c2" {
		t.Fatalf("bystander got %q", m.Body)
	}
	if err := bystander.Close(); err != nil {
		t.Fatalf("closing the bystander channel: %v", err)
	}
	declareQueue(t, openChannel(t, c1), "iso2")
	declareQueue(t, openChannel(t, c2), "iso3")
}

func TestManyChannels(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	const channels, perChannel = 100, 20
	var wg sync.WaitGroup
	errs := make(chan error, channels)
	for i := range channels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				ch, err := c.Channel()
				if err != nil {
					return err
				}
				q := fmt.Sprintf("many.%d", i)
				if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
					return err
				}
				d, err := ch.Consume(q, "", false, false, false, false, nil)
				if err != nil {
					return err
				}
				for j := range perChannel {
					body := fmt.Sprintf("%d/%d", i, j)
					if err := ch.Publish("", q, false, false, amqp091.Publishing{Body: []byte(body)}); err != nil {
						return err
					}
				}
				for j := range perChannel {
					select {
					case m := <-d:
						if want := fmt.Sprintf("%d/%d", i, j); string(m.Body) != want {
							return fmt.Errorf("channel %d got %q, want %q", i, m.Body, want)
						}
						if err := m.Ack(false); err != nil {
							return err
						}
					case <-time.After(10 * time.Second):
						return fmt.Errorf("channel %d: delivery %d missing", i, j)
					}
				}
				return ch.Close()
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c.IsClosed() {
		t.Fatal("connection closed")
	}
}

func TestClientConnectionClose(t *testing.T) {
	n := startNode(t)
	c, err := amqp091.Dial(n.url("guest", "guest", "/"))
	if err != nil {
		t.Fatal(err)
	}
	ch := openChannel(t, c)
	declareQueue(t, ch, "cc")
	for range 50 {
		publishBody(t, ch, "", "cc", "m")
	}
	// Close waits for close-ok: an error here means the server did not
	// answer the client's connection.close properly.
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if !c.IsClosed() {
		t.Fatal("connection not closed")
	}
	// Everything published before the close was handled.
	q, err := openChannel(t, n.dial(t)).QueueDeclarePassive("cc", false, false, false, false, nil)
	if err != nil || q.Messages != 50 {
		t.Fatalf("queue after close: %+v, %v; want 50 messages", q, err)
	}
}

func TestConsumerCancelNotify(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "doomed")
	cancels := ch.NotifyCancel(make(chan string, 1))
	d, err := ch.Consume("doomed", "watcher", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	publishBody(t, ch, "", "doomed", "last")
	held := receive(t, d)

	// Deleted from another connection.
	if _, err := openChannel(t, n.dial(t)).QueueDelete("doomed", false, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case tag := <-cancels:
		if tag != "watcher" {
			t.Fatalf("basic.cancel for %q, want watcher", tag)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.cancel after the queue was deleted")
	}
	// amqp091-go closes the consumer's delivery channel on basic.cancel.
	select {
	case m, ok := <-d:
		if ok {
			t.Fatalf("delivery %q after cancel", m.Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("delivery channel not closed")
	}
	// The channel is still usable; acking the dead queue's delivery is
	// harmless, and the tag is free again.
	if err := held.Ack(false); err != nil {
		t.Fatal(err)
	}
	declareQueue(t, ch, "doomed")
	if _, err := ch.Consume("doomed", "watcher", false, false, false, false, nil); err != nil {
		t.Fatalf("consume with the cancelled tag: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}
