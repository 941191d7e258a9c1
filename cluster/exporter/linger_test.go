package exporter_test

import (
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/raftq/replica"
)

// Through the real broker: a publisher with confirms that sends a message
// every 2 ms without waiting for each confirm, to a quorum queue on a
// standalone node. With a publish linger (20 ms here, longer than the
// gaps) the node's warren_wal_syncs_total grows several times less than
// without, and a consumer still gets every message once, in order.
func TestPublishLingerSharesSyncs(t *testing.T) {
	const n, gap = 150, 2 * time.Millisecond
	run := func(linger time.Duration) float64 {
		nd, url := startNodeWith(t, broker.Config{Seed: broker.DefaultSeed(), Replica: replica.Config{PublishLinger: linger}})
		syncs := func() float64 {
			v, ok := scrape(t, url+"/metrics")["warren_wal_syncs_total"]
			if !ok {
				t.Fatal("no warren_wal_syncs_total on a standalone node")
			}
			return v
		}
		_, ch := dial(t, nd)
		if _, err := ch.QueueDeclare("steady", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n+1))
		before := syncs()
		tick := time.NewTicker(gap)
		for i := range n {
			if err := ch.Publish("", "steady", false, false, amqp091.Publishing{Body: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
			<-tick.C
		}
		tick.Stop()
		for i := range n {
			select {
			case c := <-confirms:
				if !c.Ack {
					t.Fatalf("publish %d nacked", c.DeliveryTag)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("linger %v: %d of %d confirms", linger, i, n)
			}
		}
		got := syncs() - before
		deliveries, err := ch.Consume("steady", "", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			select {
			case d := <-deliveries:
				if string(d.Body) != fmt.Sprint(i) || d.Redelivered {
					t.Fatalf("delivery %d: %q (redelivered %v)", i, d.Body, d.Redelivered)
				}
				d.Ack(false)
			case <-time.After(10 * time.Second):
				t.Fatalf("linger %v: %d of %d delivered", linger, i, n)
			}
		}
		select {
		case d := <-deliveries:
			t.Fatalf("an extra delivery: %q", d.Body)
		case <-time.After(100 * time.Millisecond):
		}
		return got
	}
	held, unheld := run(20*time.Millisecond), run(0)
	t.Logf("%d publishes %v apart: %v syncs with a 20ms linger, %v without", n, gap, held, unheld)
	if held*3 > unheld {
		t.Fatalf("%v syncs with the linger against %v without: the publishes were not held together", held, unheld)
	}
}
