package node_test

import (
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// killAll kills every node at once, as SIGKILL of the whole cluster does,
// and starts them all again on their data (the first, which joined
// nobody, first).
func killAll(ms []*nodetest.Member) {
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() { defer wg.Done(); m.Kill() }()
	}
	wg.Wait()
	for _, m := range ms {
		m.Start()
	}
}

// TestWholeClusterRestartReturnsHeldMessages: when every node is killed
// at once and restarted, no channel of before survives, so what the
// consumers of then held returns to the queue at once, whatever the
// consumer disconnected timeout, as when one node restarts
// (TestRestartedConsumerNodeReturnsAtOnce). Every node restarted, so none
// saw another's earlier start end: each must learn it from the others.
func TestWholeClusterRestartReturnsHeldMessages(t *testing.T) {
	t.Parallel()
	for _, cancel := range []bool{false, true} {
		name := "attached"
		if cancel {
			name = "cancelled"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ms, _, leader, others := threeNodesWithQueue(t, "killall", withDisconnectedTimeout(10*time.Minute))
			ch := holdFiveOn(t, others[0], leader, "killall")
			if cancel {
				// basic.cancel keeps the five with the consumer, for
				// its channel to settle.
				if err := ch.Cancel("holder", false); err != nil {
					t.Fatal(err)
				}
			}
			killAll(ms)
			later := consumeSlowly(t, ms[1].Channel(), "killall", 100)
			testwait.For(t, 30*time.Second, "the five held before the restart delivered again", func() bool {
				return len(later.deliveries()) == 5
			})
		})
	}
}
