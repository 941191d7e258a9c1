package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestDeclaredThroughOneNodeRoutesFromEvery: a publish through another
// node right after declare-ok reaches the queue, a quorum one or another
// node's exclusive one. A commit needs only a majority, and one node in
// seven such publishes was dropped as unroutable until the metadata
// leader waited for every follower to hold the declaration (meta's
// awaitFollowers), and then about one run in five on CI machines until
// MayBeStale followed an entry's stages in order and a miss that finds
// nothing behind looks again (broker's lookAgainAfterMiss).
func TestDeclaredThroughOneNodeRoutesFromEvery(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ctx := context.Background()
	decl := ms[0].Channel()
	// Steady state first: a node still taking in the log of the
	// cluster's formation does not know what it lacks.
	if _, err := decl.QueueDeclare("probe", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "every node up to date", func() bool {
		for _, m := range ms {
			if _, err := m.Channel().QueueDeclarePassive("probe", true, false, false, false, quorum); err != nil {
				return false
			}
		}
		return true
	})
	type publisher struct {
		ch       *amqp091.Channel
		confirms chan amqp091.Confirmation
		returns  chan amqp091.Return
	}
	var pubs []publisher
	for _, m := range ms[1:] {
		ch := m.Channel()
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, publisher{ch, ch.NotifyPublish(make(chan amqp091.Confirmation, 1)), ch.NotifyReturn(make(chan amqp091.Return, 1))})
	}
	// Forty, not twenty: the last miss (an entry moving on between
	// MayBeStale's checks) failed one run of twenty in ten on a loaded
	// machine.
	for i := range 40 {
		name := fmt.Sprintf("declared-%d", i)
		var err error
		if i%2 == 0 {
			_, err = decl.QueueDeclare(name, true, false, false, false, quorum)
		} else {
			_, err = decl.QueueDeclare(name, false, false, true, false, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pubs {
			if err := p.ch.PublishWithContext(ctx, "", name, true, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		for j, p := range pubs {
			// A return comes before its publish's confirm.
			if c := <-p.confirms; !c.Ack {
				t.Fatalf("%s: publish through %s nacked", name, ms[j+1].Name())
			}
			select {
			case r := <-p.returns:
				t.Fatalf("%s: publish through %s right after the declaration returned %d %s", name, ms[j+1].Name(), r.ReplyCode, r.ReplyText)
			default:
			}
		}
	}
}
