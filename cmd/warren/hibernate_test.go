package main

import (
	"context"
	"testing"
	"time"

	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

// asleep reports whether every member of queue reports itself asleep.
func asleep(t *testing.T, admin adminpb.AdminClient, queue string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := admin.QuorumStatus(ctx, &adminpb.QuorumStatusRequest{Name: queue})
	if err != nil || len(st.Members) == 0 {
		return false
	}
	for _, m := range st.Members {
		if m.Role != "asleep" {
			return false
		}
	}
	return true
}

// TestClusterIdleQueueHibernates: with the binary's defaults (hibernation
// after 5 s), an emptied queue's members all report themselves asleep;
// then its old leader's node is SIGKILLed, and a publish through another
// node wakes the group on the two left, is confirmed, and is consumed.
func TestClusterIdleQueueHibernates(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster process test")
	}
	c := startProcCluster(t, 3, clusterOpts{})
	declareQuorum(t, c.nodes[1], "nap")
	conn, ch := c.nodes[1].channel(t)
	defer conn.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	if _, n := answers(t, publishNumbered(t, ch, "nap", 1, 0)); n != 0 {
		t.Fatal("the first publish was nacked")
	}
	if _, ok, err := ch.Get("nap", true); err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	leader := queueLeader(t, c, "nap")
	admin := adminClient(t, c.nodes[2])
	testwait.For(t, 30*time.Second, "the emptied queue to hibernate", func() bool { return asleep(t, admin, "nap") })
	leader.kill()
	var via *clusterNode
	for _, nd := range c.nodes {
		if nd != leader {
			via = nd
		}
	}
	conn2, ch2 := via.channel(t)
	defer conn2.Close()
	if err := ch2.Confirm(false); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, n := answers(t, publishNumbered(t, ch2, "nap", 1, 0)); n != 0 {
		t.Fatal("the publish that woke the queue was nacked")
	}
	t.Logf("confirmed %v after it was sent, its old leader's node killed", time.Since(start))
	d, ok, err := ch2.Get("nap", false)
	if err != nil || !ok {
		t.Fatalf("get after the wake: %v %v", ok, err)
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}
}
