package node_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/node/nodetest"
)

// TestKilledLeaderFailover: queue groups heartbeat rarely (a 5 s
// timeout, so raft alone would wait at least 5 s of silence), yet the
// queues a killed node led get new leaders within a few seconds, because
// gossip reports the failure and their followers elect at once.
func TestKilledLeaderFailover(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	const n = 9
	ch := ms[0].Channel()
	for i := range n {
		if _, err := ch.QueueDeclare(fmt.Sprintf("f%d", i), true, false, false, false, quorum); err != nil {
			t.Fatal(err)
		}
	}
	nodetest.Eventually(t, "every queue led, by more than one node", 30*time.Second, func() bool {
		total := 0
		for _, m := range ms {
			total += m.LeadingQueues()
		}
		return total == n && ms[1].LeadingQueues() > 0
	})
	// A while idle: the groups keep their leaders on rare heartbeats.
	before := []int{ms[0].LeadingQueues(), ms[1].LeadingQueues(), ms[2].LeadingQueues()}
	time.Sleep(2 * time.Second)
	for i, m := range ms {
		if got := m.LeadingQueues(); got != before[i] {
			t.Errorf("%s led %d queues, then %d while idle", m.Name(), before[i], got)
		}
	}

	victim := ms[1]
	lost := victim.LeadingQueues()
	victim.Kill()
	killed := time.Now()
	survivors := []*nodetest.Member{ms[0], ms[2]}
	nodetest.Eventually(t, "new leaders for the killed node's queues", 20*time.Second, func() bool {
		return survivors[0].LeadingQueues()+survivors[1].LeadingQueues() == n
	})
	took := time.Since(killed)
	t.Logf("%d queues led by the killed node had new leaders %v after the kill", lost, took)
	if took > 5*time.Second {
		t.Errorf("failover took %v, no quicker than the queue heartbeat timeout", took)
	}

	// The restarted node catches up and follows.
	victim.Start()
	nodetest.Eventually(t, "every queue led after the restart", 30*time.Second, func() bool {
		total := 0
		for _, m := range ms {
			total += m.LeadingQueues()
		}
		return total == n
	})
}
