package node_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestThousandQueuesSpread declares 1,000 quorum queues through one node
// of three and checks that each node leads a third of them, within 10%.
// It is slow (minutes under -race), so it runs in `make test-slow`, not
// in `make test`.
func TestThousandQueuesSpread(t *testing.T) {
	if os.Getenv("WARREN_SLOW_TESTS") == "" {
		t.Skip("slow: set WARREN_SLOW_TESTS=1 (make test-slow)")
	}
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	start := time.Now()
	const n = 1000
	for i := 0; i < n; i++ {
		if _, err := ch.QueueDeclare(fmt.Sprintf("q%04d", i), true, false, false, false, quorum); err != nil {
			t.Fatalf("declare %d: %v", i, err)
		}
	}
	t.Logf("declared %d quorum queues in %v", n, time.Since(start))
	testwait.For(t, 5*time.Minute, "every queue led, each node within 10% of a third", func() bool {
		total := 0
		for _, m := range ms {
			l := m.LeadingQueues()
			total += l
			if l < 300 || l > 366 {
				return false
			}
		}
		return total == n
	})
	for _, m := range ms {
		t.Logf("%s leads %d", m.Name(), m.LeadingQueues())
	}
}
