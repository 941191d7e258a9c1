package node_test

import (
	"os"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/node/nodetest"
)

// TestCancelThenCloseStrandsNothing reproduces an open defect
// (jepsen/README.md, "One delivery stranded"): a consumer attached
// through a node that does not lead its queue is cancelled and its
// connection closed at once, as amqp091's ConsumeWithContext does when its
// context ends, while the leader is delivering. Every message must be
// ready again once the consumers are gone; under -race, from one run in
// four to every run ends with a prefetch window (32) held for a gone
// consumer. It is skipped
// unless WARREN_REPRO is set, until the defect is fixed.
func TestCancelThenCloseStrandsNothing(t *testing.T) {
	if os.Getenv("WARREN_REPRO") == "" {
		t.Skip("reproduces an open defect; set WARREN_REPRO=1 to run")
	}
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("cc", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	leader := leaderName(t, ms, "cc")
	via := notNamed(ms, leader)
	const n = 400
	publishSome(t, byName(ms, leader), "cc", n)
	for range 30 {
		conn := via.Dial()
		c, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Qos(32, 0, false); err != nil {
			t.Fatal(err)
		}
		ds, err := c.Consume("cc", "k", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-ds // deliveries are flowing
		c.Cancel("k", true)
		conn.Close()
	}
	nodetest.Eventually(t, "every message ready again", 15*time.Second, func() bool {
		q, err := ch.QueueDeclarePassive("cc", true, false, false, false, quorum)
		// declare-ok counts the messages ready, as RabbitMQ's does.
		return err == nil && q.Messages == n && q.Consumers == 0
	})
}
