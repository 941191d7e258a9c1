package node_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestDeleteOkCountsThroughAFollower deletes a quorum queue through a node
// whose member follows: delete-ok must count every confirmed message, as
// the leader has them, though the follower's member has not applied the
// last publish yet (raft tells followers of a commit with the next entry).
func TestDeleteOkCountsThroughAFollower(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	if _, err := ms[0].Channel().QueueDeclare("counted", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	var follower *nodetest.Member
	testwait.For(t, 10*time.Second, "a follower of the queue", func() bool {
		for _, m := range ms {
			if st, ok := m.QueueMember("/", "counted"); ok && st.State == "Follower" {
				follower = m
				return true
			}
		}
		return false
	})
	ch := follower.Channel()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "counted", false, false, amqp091.Publishing{Body: []byte("m")})
		if err != nil || !dc.Wait() {
			t.Fatalf("publish: %v", err)
		}
	}
	n, err := ch.QueueDelete("counted", false, false, false)
	if err != nil || n != 2 {
		t.Fatalf("delete-ok counts %d (%v), want 2", n, err)
	}
}
