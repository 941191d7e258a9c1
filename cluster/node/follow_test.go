package node_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/replica"
	"github.com/warrenmq/warren/raftq/testwait"
)

// slowConsumer holds what it is given without acknowledging it.
type slowConsumer struct {
	mu   sync.Mutex
	got  []amqp091.Delivery
	seen map[string]int
}

func consumeSlowly(t *testing.T, ch *amqp091.Channel, queue string, prefetch int) *slowConsumer {
	t.Helper()
	if err := ch.Qos(prefetch, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &slowConsumer{seen: map[string]int{}}
	go func() {
		for d := range ds {
			s.mu.Lock()
			s.got = append(s.got, d)
			s.seen[string(d.Body)]++
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *slowConsumer) deliveries() []amqp091.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func publishConfirmedN(t *testing.T, ch *amqp091.Channel, queue string, from, n int) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := from; i < from+n; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(callCtx(t, 30*time.Second), "", queue, false, false,
			amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(fmt.Sprintf("m%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(callCtx(t, 30*time.Second)); err != nil || !ok {
			t.Fatalf("publish m%d: confirmed %v, %v", i, ok, err)
		}
	}
}

// threeNodesWithQueue starts three nodes and declares queue name on the
// first; it returns the nodes, an admin client, the queue's leader and
// the other two nodes.
func threeNodesWithQueue(t *testing.T, name string, args amqp091.Table) (ms []*nodetest.Member, c adminpb.AdminClient, leader *nodetest.Member, others []*nodetest.Member) {
	t.Helper()
	ms = nodetest.StartCluster(t, 3)
	if _, err := ms[0].Channel().QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	c = adminClient(t, ms[0])
	lead := queueLeader(t, c, name)
	for _, m := range ms {
		if m.Name() == lead {
			leader = m
		} else {
			others = append(others, m)
		}
	}
	return ms, c, leader, others
}

// checkKept checks that the slow consumer still has exactly the n
// messages it was first given, none of them again, and that nobody else
// got them.
func (s *slowConsumer) checkKept(t *testing.T, n int, what string) {
	t.Helper()
	got := s.deliveries()
	if len(got) != n {
		var bodies []string
		for _, d := range got {
			bodies = append(bodies, fmt.Sprintf("%s(redelivered=%v)", d.Body, d.Redelivered))
		}
		t.Fatalf("%s: the consumer holding %d messages was given %d: %v", what, n, len(got), bodies)
	}
}

// TestConsumerKeepsItsMessagesWhenTheLeaderMoves: a consumer working
// slowly on the messages it holds keeps them while the queue's leadership
// moves (to its own node, then away), past the grace a new leader gives
// consumers to come back, as a RabbitMQ consumer keeps them; nobody else
// gets them, it is not given them again, and its acknowledgements, sent
// after the moves for deliveries the first leader made, settle them.
func TestConsumerKeepsItsMessagesWhenTheLeaderMoves(t *testing.T) {
	t.Parallel()
	ms, c, leader, others := threeNodesWithQueue(t, "slow", quorum)
	consumerNode, third := others[0], others[1]
	slow := consumeSlowly(t, consumerNode.Channel(), "slow", 5)
	publishConfirmedN(t, leader.Channel(), "slow", 0, 20)
	testwait.For(t, 10*time.Second, "5 deliveries", func() bool { return len(slow.deliveries()) == 5 })

	transfer := func(to string) {
		t.Helper()
		resp, err := c.TransferLeadership(callCtx(t, 30*time.Second), &adminpb.TransferLeadershipRequest{Name: "slow", To: to})
		if err != nil || !resp.Moved {
			t.Fatalf("transfer to %s: %v, %v", to, resp, err)
		}
		if got := queueLeader(t, c, "slow"); got != to {
			t.Fatalf("leader %s after the transfer to %s", got, to)
		}
	}
	transfer(consumerNode.Name()) // the consumer's stream ends; it attaches locally
	// Past the orphan grace, when wrongly returned messages would go.
	time.Sleep(replica.OrphanGrace + time.Second)
	slow.checkKept(t, 5, "after a move to its node")
	transfer(third.Name()) // and from local to remote
	// Past the orphan grace, when wrongly returned messages would go.
	time.Sleep(replica.OrphanGrace + time.Second)
	slow.checkKept(t, 5, "after a move away from its node")

	// A second consumer gets the other 15, none of the 5.
	other := consumeSlowly(t, ms[0].Channel(), "slow", 100)
	testwait.For(t, 10*time.Second, "the other 15 delivered", func() bool { return len(other.deliveries()) == 15 })
	held := map[string]bool{}
	for _, d := range slow.deliveries() {
		held[string(d.Body)] = true
		if d.Redelivered {
			t.Errorf("%s marked redelivered", d.Body)
		}
	}
	for _, d := range other.deliveries() {
		if held[string(d.Body)] {
			t.Errorf("%s, held by the slow consumer, delivered to another", d.Body)
		}
		d.Ack(false)
	}
	for _, d := range slow.deliveries() {
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 15*time.Second, "the queue empty once both acknowledged", func() bool {
		q, err := third.Channel().QueueDeclarePassive("slow", true, false, false, false, quorum)
		return err == nil && q.Messages == 0 && q.Consumers == 2
	})
	time.Sleep(replica.OrphanGrace) // past the orphan grace: a wrong redelivery would show
	if n := len(slow.deliveries()) + len(other.deliveries()); n != 20 {
		t.Errorf("%d deliveries of 20 messages", n)
	}
}

// TestConsumerKeepsItsMessagesWhenTheLeaderIsKilled: the same when the
// leader's node is killed. The consumer, on a node that lives, attaches
// to the new leader with what it holds, and its acknowledgements of the
// dead leader's deliveries settle them at the new one.
func TestConsumerKeepsItsMessagesWhenTheLeaderIsKilled(t *testing.T) {
	t.Parallel()
	_, c, victim, others := threeNodesWithQueue(t, "slow", quorum)
	slow := consumeSlowly(t, others[0].Channel(), "slow", 5)
	publishConfirmedN(t, others[1].Channel(), "slow", 0, 20)
	testwait.For(t, 10*time.Second, "5 deliveries", func() bool { return len(slow.deliveries()) == 5 })

	dead := victim.Name()
	victim.Kill()
	c = adminClient(t, others[1])
	testwait.For(t, 30*time.Second, "a new leader", func() bool {
		st, err := c.QuorumStatus(callCtx(t, 5*time.Second), &adminpb.QuorumStatusRequest{Name: "slow"})
		return err == nil && st.Leader != "" && st.Leader != dead
	})
	time.Sleep(replica.OrphanGrace + time.Second) // past the orphan grace, when wrongly returned messages would go
	slow.checkKept(t, 5, "after the leader was killed")
	for _, d := range slow.deliveries() {
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 15*time.Second, "the next 5 delivered, the acknowledged ones not again", func() bool {
		return len(slow.deliveries()) == 10
	})
	for b, n := range slow.seen {
		if n > 1 {
			t.Errorf("%s delivered %d times", b, n)
		}
	}
}

// TestSingleActiveConsumerStaysActiveWhenTheLeaderMoves: the single
// active consumer of a queue stays the active one through leadership
// moves while it works on its messages; the waiting consumer gets
// nothing meanwhile, as with RabbitMQ.
func TestSingleActiveConsumerStaysActiveWhenTheLeaderMoves(t *testing.T) {
	t.Parallel()
	ms, c, leader, others := threeNodesWithQueue(t, "sac",
		amqp091.Table{"x-queue-type": "quorum", "x-single-active-consumer": true})
	active := consumeSlowly(t, others[0].Channel(), "sac", 5)
	time.Sleep(200 * time.Millisecond) // the first to attach is the active one
	waiting := consumeSlowly(t, others[1].Channel(), "sac", 5)
	publishConfirmedN(t, ms[0].Channel(), "sac", 0, 20)
	testwait.For(t, 10*time.Second, "5 deliveries", func() bool { return len(active.deliveries()) == 5 })

	for _, to := range []string{others[1].Name(), leader.Name()} {
		resp, err := c.TransferLeadership(callCtx(t, 30*time.Second), &adminpb.TransferLeadershipRequest{Name: "sac", To: to})
		if err != nil || !resp.Moved {
			t.Fatalf("transfer to %s: %v, %v", to, resp, err)
		}
		time.Sleep(replica.OrphanGrace + time.Second) // past the orphan grace, when wrongly returned messages would go
		active.checkKept(t, 5, "after a move to "+to)
		if n := len(waiting.deliveries()); n != 0 {
			t.Fatalf("after a move to %s: the waiting consumer got %d messages", to, n)
		}
	}
	for _, d := range active.deliveries() {
		d.Ack(false)
	}
	testwait.For(t, 15*time.Second, "the active consumer given the next 5", func() bool {
		return len(active.deliveries()) == 10
	})
	if n := len(waiting.deliveries()); n != 0 {
		t.Fatalf("the waiting consumer got %d messages", n)
	}
}

// TestDeadLettersNotRepeatedByANewLeader: a member that leads again
// applies the entries the leader before it committed; the at-most-once
// dead letters those entries made were that leader's to publish, and are
// not published twice.
func TestDeadLettersNotRepeatedByANewLeader(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("dlq", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	args := amqp091.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}
	if _, err := ch.QueueDeclare("rejects", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	c := adminClient(t, ms[0])
	first := queueLeader(t, c, "rejects")
	var second string
	for _, m := range ms {
		if m.Name() != first {
			second = m.Name()
			break
		}
	}
	transfer := func(to string) {
		t.Helper()
		resp, err := c.TransferLeadership(callCtx(t, 30*time.Second), &adminpb.TransferLeadershipRequest{Name: "rejects", To: to})
		if err != nil || !resp.Moved {
			t.Fatalf("transfer to %s: %v, %v", to, resp, err)
		}
	}
	transfer(second)
	publishConfirmedN(t, ms[1].Channel(), "rejects", 0, 10)
	sub := ms[2].Channel()
	ds, err := sub.Consume("rejects", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		d := <-ds
		d.Reject(false)
	}
	testwait.For(t, 15*time.Second, "10 dead letters", func() bool {
		q, err := ms[0].Channel().QueueDeclarePassive("dlq", true, false, false, false, quorum)
		return err == nil && q.Messages == 10
	})
	transfer(first) // it has not applied the rejects yet: followers apply lazily
	// Time for the new leader to dead-letter again, were it to.
	time.Sleep(3 * time.Second)
	q, err := ms[0].Channel().QueueDeclarePassive("dlq", true, false, false, false, quorum)
	if err != nil || q.Messages != 10 {
		t.Fatalf("dlq: %d messages, %v; want the 10 dead letters once", q.Messages, err)
	}
}

// TestCancelledConsumerNodeRestarted: a cancelled consumer's node that
// restarts quicker than gossip calls it failed has lost its channels all
// the same: its new boot tells, and what the consumer held returns.
func TestCancelledConsumerNodeRestarted(t *testing.T) {
	t.Parallel()
	_, _, _, others := threeNodesWithQueue(t, "restarted", quorum)
	victim := others[0]
	ch := victim.Channel()
	if err := ch.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume("restarted", "worker", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	publishConfirmedN(t, others[1].Channel(), "restarted", 0, 5)
	for range 5 {
		<-ds
	}
	if err := ch.Cancel("worker", false); err != nil {
		t.Fatal(err)
	}
	victim.Kill()
	victim.Start()
	other := consumeSlowly(t, others[1].Channel(), "restarted", 100)
	testwait.For(t, 30*time.Second, "the restarted node's cancelled consumer's 5 delivered again", func() bool {
		return len(other.deliveries()) == 5
	})
}

// TestCancelledConsumerKeepsItsMessagesWhenTheLeaderMoves: a consumer
// cancelled with basic.cancel keeps its unacknowledged messages for its
// channel to settle, through leader moves too, as in RabbitMQ; a new leader
// returned them after OrphanGrace, and the channel's late acknowledgement
// then had the message delivered again. The same holds for a message taken
// with basic.get through a node that does not lead.
func TestCancelledConsumerKeepsItsMessagesWhenTheLeaderMoves(t *testing.T) {
	t.Parallel()
	ms, c, leader, others := threeNodesWithQueue(t, "kept", quorum)
	consumerNode := others[0]
	publishConfirmedN(t, leader.Channel(), "kept", 0, 2)
	ch := consumerNode.Channel()
	ds, err := ch.Consume("kept", "c", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var first amqp091.Delivery
	select {
	case first = <-ds:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	if err := ch.Cancel("c", false); err != nil {
		t.Fatal(err)
	}
	// The second message, if the consumer got it before the cancel, goes
	// back with a nack; then a get through the same node takes it.
	for d := range ds {
		d.Nack(false, true)
	}
	var got amqp091.Delivery
	testwait.For(t, 10*time.Second, "a basic.get", func() bool {
		var ok bool
		got, ok, err = ch.Get("kept", false)
		return err == nil && ok
	})

	resp, err := c.TransferLeadership(callCtx(t, 30*time.Second), &adminpb.TransferLeadershipRequest{Name: "kept", To: others[1].Name()})
	if err != nil || !resp.Moved {
		t.Fatalf("transfer: %v, %v", resp, err)
	}
	time.Sleep(replica.OrphanGrace + time.Second) // past the orphan grace, when wrongly returned messages would go
	if q := listedQueue(t, c, "kept"); q.Ready != 0 || q.Unacked != 2 {
		t.Fatalf("after the move: %d ready, %d unacknowledged; want both still held", q.Ready, q.Unacked)
	}
	watch := consumeSlowly(t, ms[0].Channel(), "kept", 10)
	if err := first.Ack(false); err != nil {
		t.Fatal(err)
	}
	if err := got.Ack(false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "the queue empty after the late acks", func() bool {
		q := listedQueue(t, c, "kept")
		return q.Messages == 0 && q.Unacked == 0
	})
	time.Sleep(time.Second) // time for a held message to go elsewhere, were it to
	if n := len(watch.deliveries()); n != 0 {
		t.Fatalf("%d of the held messages delivered to another consumer", n)
	}
}
