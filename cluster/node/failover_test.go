package node_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestKilledLeaderFailover: queue groups heartbeat rarely (a 5 s
// timeout, so raft alone would wait at least 5 s of silence), yet the
// queues a killed node led get new leaders within a few seconds, because
// gossip reports the failure and their followers elect at once.
func TestKilledLeaderFailover(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	const n = 9
	declareLed(t, ms, "f", n, ms[1])
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
	awaitNewLeaders(t, "killed", lost, n, time.Now(), 20*time.Second, 5*time.Second, ms[0], ms[2])

	// The restarted node catches up and follows.
	victim.Start()
	testwait.For(t, 30*time.Second, "every queue led after the restart", func() bool {
		return leading(ms...) == n
	})
}

// TestLeftLeaderFailover: a node that stops gracefully but could not
// hand its leaderships off (here it is told not to try) is gone as surely
// as a killed one: the members that still follow it elect at once when
// gossip reports it left, rather than after the queue groups' heartbeat
// timeout (30 s here).
func TestLeftLeaderFailover(t *testing.T) {
	ms := nodetest.StartCluster(t, 3, func(c *node.ClusterConfig) {
		c.QueueTimeout = 30 * time.Second
		c.NoHandOffOnStop = true
		c.NoRebalanceOnRejoin = true
	})
	const n = 6
	declareLed(t, ms, "l", n, ms[2])
	// Formed, so that what is timed is the failover of a leader that
	// led: a group whose first leader goes before its followers hold
	// the configuration elects once they have written it (replica's
	// TestFirstLeaderGoneBeforeItsFirstEntries), which takes longer.
	awaitFormed(t, ms, "l", n)
	lost := ms[2].LeadingQueues()
	ms[2].Stop()
	awaitNewLeaders(t, "stopped", lost, n, time.Now(), 25*time.Second, 10*time.Second, ms[0], ms[1])
}

// awaitFormed waits until every member of queues prefix0..prefix(n-1)
// votes and holds the group's first entries.
func awaitFormed(t *testing.T, ms []*nodetest.Member, prefix string, n int) {
	t.Helper()
	testwait.For(t, 30*time.Second, "every queue formed, with three voters", func() bool {
		for i := range n {
			for _, m := range ms {
				if st, ok := m.QueueMember("/", fmt.Sprintf("%s%d", prefix, i)); !ok || !st.Voter || st.LastLogIndex == 0 {
					return false
				}
			}
		}
		return true
	})
}

// awaitNewLeaders waits (up to wait) until survivors lead all n queues
// after a node that led lost of them went (how: killed, stopped) at
// since, and fails the test if that took longer than within: no quicker
// than the queue groups' heartbeat timeout.
func awaitNewLeaders(t *testing.T, how string, lost, n int, since time.Time, wait, within time.Duration, survivors ...*nodetest.Member) {
	t.Helper()
	testwait.For(t, wait, "new leaders for the "+how+" node's queues", func() bool {
		return leading(survivors...) == n
	})
	took := time.Since(since)
	t.Logf("%d queues led by the %s node had new leaders %v after it went", lost, how, took)
	if took > within {
		t.Errorf("failover took %v after the node was %s, no quicker than the queue heartbeat timeout", took, how)
	}
}

// leading is how many queues ms lead together.
func leading(ms ...*nodetest.Member) int {
	total := 0
	for _, m := range ms {
		total += m.LeadingQueues()
	}
	return total
}

// declareLed declares n quorum queues named prefix0, prefix1, ... through
// ms[0] and waits until each has a leader, some of them on node by.
func declareLed(t *testing.T, ms []*nodetest.Member, prefix string, n int, by *nodetest.Member) {
	t.Helper()
	ch := ms[0].Channel()
	for i := range n {
		if _, err := ch.QueueDeclare(fmt.Sprintf("%s%d", prefix, i), true, false, false, false, quorum); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 30*time.Second, "every queue led, some by "+by.Name(), func() bool {
		return leading(ms...) == n && by.LeadingQueues() > 0
	})
}

// TestWholeClusterRestart: every node stops, then all start again. Nobody
// leads any queue then, and raft alone would elect only after the queue
// groups' timeout (10 s) of silence; a member that starts asks whether a
// majority would vote for it and, as nobody leads, campaigns. Every queue
// has a leader within a few seconds of the last start, with its messages.
func TestWholeClusterRestart(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	const n = 6
	ch := ms[0].Channel()
	for i := range n {
		if _, err := ch.QueueDeclare(fmt.Sprintf("w%d", i), true, false, false, false, quorum); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		publishSome(t, ms[i%3], fmt.Sprintf("w%d", i), 5)
	}
	for _, m := range ms {
		m.Stop()
	}
	for _, m := range ms {
		m.Start()
	}
	started := time.Now()
	testwait.For(t, 30*time.Second, "every queue led after the restart", func() bool {
		return leading(ms...) == n
	})
	took := time.Since(started)
	t.Logf("every queue led %v after the last node started", took)
	if took > 6*time.Second {
		t.Errorf("elections took %v after a whole-cluster restart: no quicker than the queue timeout", took)
	}
	ch = ms[1].Channel()
	for i := range n {
		q, err := ch.QueueDeclarePassive(fmt.Sprintf("w%d", i), true, false, false, false, quorum)
		if err != nil {
			t.Fatal(err)
		}
		if q.Messages != 5 {
			t.Errorf("%s holds %d messages after the restart, want 5", q.Name, q.Messages)
		}
	}
}

// TestRestartDisturbsNoLeader: a node restarts while the others keep
// leading its queues; its members ask whether they would be elected, the
// groups say no (they have a leader), and no election follows: every
// queue keeps its leader and its term.
func TestRestartDisturbsNoLeader(t *testing.T) {
	ms := nodetest.StartCluster(t, 3, func(c *node.ClusterConfig) { c.NoRebalanceOnRejoin = true })
	const n = 6
	ch := ms[0].Channel()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("d%d", i)
		if _, err := ch.QueueDeclare(names[i], true, false, false, false, quorum); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 30*time.Second, "every queue with three voters", func() bool {
		for _, q := range names {
			for _, m := range ms {
				if st, ok := m.QueueMember("/", q); !ok || !st.Voter {
					return false
				}
			}
		}
		return true
	})
	restarted := ms[2]
	restarted.Stop()
	type lead struct {
		node string
		term uint64
	}
	leads := func() map[string]lead {
		out := map[string]lead{}
		for _, q := range names {
			for _, m := range ms[:2] {
				if st, ok := m.QueueMember("/", q); ok && st.State == "Leader" {
					out[q] = lead{m.Name(), st.Term}
				}
			}
		}
		return out
	}
	var before map[string]lead
	testwait.For(t, 30*time.Second, "every queue led by the two running nodes", func() bool {
		before = leads()
		return len(before) == n
	})
	restarted.Start()
	back := time.Now()
	testwait.For(t, 30*time.Second, "the restarted node following every queue", func() bool {
		for _, q := range names {
			st, ok := restarted.QueueMember("/", q)
			if !ok || st.State != "Follower" || st.Term < before[q].term {
				return false
			}
		}
		return true
	})
	t.Logf("the restarted node followed every queue %v after it started", time.Since(back))
	// Past the members' questions (they start at once and are repeated
	// 0.5, 1 and 2 s later while nobody is known to lead).
	time.Sleep(5 * time.Second)
	if after := leads(); !maps.Equal(after, before) {
		t.Errorf("leaders and terms changed across a node's restart:\nbefore %v\nafter  %v", before, after)
	}
}

// TestRestartedNodeCatchesUp: a node stopped for 21 s while its queue
// takes publishes holds every committed entry within seconds of its
// restart. Its leaders' replication to it, of the metadata as of the
// queue, waited for it rather than failing into raft's backoff (up to
// ten seconds between tries once ten seconds of them have failed): with
// the metadata group still failing fast, the queue caught up 6.3 s after
// the restart (more than 5 s twice under the race detector), the node's
// queues waiting for its metadata; with both waiting, 0.9 and 1.4 s (1.9
// under the race detector). cmd/warren's
// TestClusterRestartedFollowerCatchesUp does the same with processes.
func TestRestartedNodeCatchesUp(t *testing.T) {
	ms := nodetest.StartCluster(t, 3, func(c *node.ClusterConfig) { c.NoRebalanceOnRejoin = true })
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("back", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var leader, follower *nodetest.Member
	testwait.For(t, 10*time.Second, "a leader", func() bool {
		for i, m := range ms {
			if st, ok := m.QueueMember("/", "back"); ok && st.State == "Leader" {
				leader, follower = m, ms[(i+1)%3]
				return true
			}
		}
		return false
	})
	publish := func() {
		t.Helper()
		dc, err := ch.PublishWithDeferredConfirm("", "back", false, false, amqp091.Publishing{Body: []byte("m")})
		if err != nil {
			t.Fatal(err)
		}
		if !dc.Wait() {
			t.Fatal("publish nacked")
		}
	}
	publish()
	testwait.For(t, 30*time.Second, "the follower a voter holding the publish", func() bool {
		l, _ := leader.QueueMember("/", "back")
		st, ok := follower.QueueMember("/", "back")
		return ok && st.Voter && st.LastLogIndex >= l.CommitIndex
	})
	follower.Stop()
	// Traffic all along the downtime, long enough for raft's backoff to
	// the stopped follower to reach its ten-second ceiling: each publish
	// has the leader try the stopped follower again.
	for stop := time.Now().Add(21 * time.Second); time.Now().Before(stop); time.Sleep(100 * time.Millisecond) {
		publish()
	}
	follower.Start()
	back := time.Now()
	want, _ := leader.QueueMember("/", "back")
	testwait.For(t, 5*time.Second, "the restarted follower to hold every committed entry", func() bool {
		st, ok := follower.QueueMember("/", "back")
		return ok && st.LastLogIndex >= want.CommitIndex
	})
	t.Logf("caught up %v after the restart", time.Since(back))
}

// TestCancelledConsumerNodeKilled: a consumer attached through one node
// takes a message, is cancelled (basic.cancel: its unacked message stays
// with the channel), and its node is killed before the channel settles.
// The message must come back to the queue for another consumer; it
// stayed unacked for good, held for a channel that no longer existed
// (found by the chaos harness, with a graceful stop).
func TestCancelledConsumerNodeKilled(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("held", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	leader := leaderName(t, ms, "held")
	var via, other *nodetest.Member
	for _, m := range ms {
		if m.Name() != leader && via == nil {
			via = m
		} else if m.Name() != leader || other == nil {
			other = m
		}
	}
	if err := ch.Publish("", "held", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	vch := via.Channel()
	ds, err := vch.Consume("held", "c", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ds:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	if err := vch.Cancel("c", false); err != nil {
		t.Fatal(err)
	}
	via.Kill()
	expectRedelivery(t, other, "held")
}

// expectRedelivery consumes queue through m and expects a message, flagged
// redelivered, within 30 s: one a killed node's channel held.
func expectRedelivery(t *testing.T, m *nodetest.Member, queue string) {
	t.Helper()
	again, err := m.Channel().Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-again:
		if !d.Redelivered {
			t.Error("the returned message is not flagged redelivered")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the message the killed node's channel held never came back")
	}
}

// TestGotMessageNodeKilled: a channel on a node that does not lead takes a
// message with basic.get and its node is killed before it settles it. The
// message must come back to the queue for another consumer: it stayed
// checked out to the leader's own getter, which nothing returns, until
// the consumer timeout (found by the chaos harness, with a cut link).
func TestGotMessageNodeKilled(t *testing.T) {
	t.Parallel()
	ms, _, _, others := threeNodesWithQueue(t, "got", quorum)
	via, other := others[0], others[1]
	if err := ms[0].Channel().Publish("", "got", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	vch := via.Channel()
	testwait.For(t, 10*time.Second, "basic.get to find the message", func() bool {
		_, ok, err := vch.Get("got", false)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	via.Kill()
	expectRedelivery(t, other, "got")
}

// TestLeaderlessQueueIsNotReportedMissing: a quorum queue whose group has
// lost its majority still exists. basic.get and basic.consume that find
// no leader in time close the connection with 541 INTERNAL_ERROR, as
// RabbitMQ's "timed out consuming from quorum queue", rather than the 404
// an application would take for a queue that is gone.
func TestLeaderlessQueueIsNotReportedMissing(t *testing.T) {
	t.Parallel()
	ms, _, _, _ := threeNodesWithQueue(t, "lonely", quorum)
	ms[1].Kill()
	ms[2].Kill()
	for _, op := range []string{"basic.get", "basic.consume"} {
		ch := ms[0].Channel()
		var err error
		if op == "basic.get" {
			_, _, err = ch.Get("lonely", false)
		} else {
			_, err = ch.Consume("lonely", "", false, false, false, false, nil)
		}
		var ae *amqp091.Error
		if !errors.As(err, &ae) || ae.Code != amqp091.InternalError || !ae.Server {
			t.Fatalf("%s without a leader: %v, want 541 INTERNAL_ERROR", op, err)
		}
		if !strings.Contains(ae.Reason, "quorum queue 'lonely'") {
			t.Errorf("%s: reason %q does not name the queue", op, ae.Reason)
		}
	}
}

// TestDrainedLeaderRestartedQuickerThanGossip: a queue's leader's node is
// drained (recorded, its leadership not yet moved), killed and started
// again before gossip notices a failure. Its member comes back drained and
// does not campaign; the other members saw no failure, only the node's
// new boot, and still believe in the old leader. They elect among
// themselves at once rather than after the queue timeout (10 s here), and
// no confirmed message is lost. (Found by the chaos harness: a restart
// then a drain left a queue leaderless for 20 s.)
func TestDrainedLeaderRestartedQuickerThanGossip(t *testing.T) {
	// The drained node keeps its leadership until it is killed.
	t.Cleanup(node.SetMaintainInterval(time.Hour))
	ms := nodetest.StartCluster(t, 3, func(c *node.ClusterConfig) {
		// Gossip probes so rarely that a restart of a second goes
		// unnoticed as a failure: it shows only as a new boot.
		c.ProbeInterval, c.ProbeTimeout = time.Minute, 10*time.Second
	})
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("rs", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	var victim *nodetest.Member
	testwait.For(t, 20*time.Second, "a leader for the queue", func() bool {
		for _, m := range ms {
			if m.QueueLeads("/", "rs") {
				victim = m
				return true
			}
		}
		return false
	})
	if victim == ms[0] {
		// The first node joined nobody: restarted, it would wait for
		// the others' gossip to find it.
		if err := ms[0].TransferLeadership("/", "rs", ms[1].Name()); err != nil {
			t.Fatal(err)
		}
		victim = ms[1]
		testwait.For(t, 20*time.Second, "the queue led by "+victim.Name(), func() bool { return victim.QueueLeads("/", "rs") })
	}
	var survivors []*nodetest.Member
	for _, m := range ms {
		if m != victim {
			survivors = append(survivors, m)
		}
	}
	publishSome(t, survivors[0], "rs", 5)

	if err := survivors[0].RecordDraining(victim.Name(), true); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the victim sees itself drained", func() bool { return victim.SeesDraining(victim.Name()) })
	if !victim.QueueLeads("/", "rs") {
		t.Fatal("the drained node handed its leadership off before it was killed")
	}
	victim.Kill()
	victim.Start()
	restarted := time.Now()
	// It learns it is drained as it catches up with the metadata (the
	// model it restarted with may predate the drain), not at its
	// maintenance loop's next turn.
	testwait.For(t, 5*time.Second, "the restarted node's member drained", func() bool { return victim.QueueMemberDrained("/", "rs") })
	testwait.For(t, 30*time.Second, "a new leader on another node", func() bool {
		return survivors[0].QueueLeads("/", "rs") || survivors[1].QueueLeads("/", "rs")
	})
	took := time.Since(restarted)
	t.Logf("a new leader %v after the drained leader's node restarted", took)
	if took > 5*time.Second {
		t.Errorf("a new leader took %v: the survivors waited for their timeout", took)
	}
	if victim.QueueLeads("/", "rs") {
		t.Error("the drained node leads again")
	}
	publishSome(t, survivors[1], "rs", 5)
	q, err := survivors[1].Channel().QueueDeclarePassive("rs", true, false, false, false, quorum)
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages != 10 {
		t.Errorf("the queue holds %d messages, want 10", q.Messages)
	}
}
