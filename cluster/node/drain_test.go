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
	"github.com/warrenmq/warren/raftq/testwait"
)

// drainPublisher publishes numbered messages with confirms to queue q
// through a connection to the first of nodes, and on a forced close
// reconnects to the next; it records the bodies confirmed.
type drainPublisher struct {
	mu        sync.Mutex
	confirmed []string
	forced    []*amqp091.Error // the closes it received
}

func (p *drainPublisher) run(t *testing.T, nodes []*nodetest.Member, q string, stop <-chan struct{}) {
	seq := 0
	for _, m := range nodes {
		conn, err := amqp091.Dial("amqp://guest:guest@" + m.AMQPAddr().String() + "/")
		if err != nil {
			continue
		}
		closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
		ch, err := conn.Channel()
		if err == nil {
			err = ch.Confirm(false)
		}
		for err == nil {
			select {
			case <-stop:
				conn.Close()
				return
			default:
			}
			body := fmt.Sprintf("m%d", seq)
			seq++
			var dc *amqp091.DeferredConfirmation
			dc, err = ch.PublishWithDeferredConfirm("", q, false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte(body)})
			if err != nil {
				break
			}
			var ok bool
			ok, err = dc.WaitContext(callCtx(t, 15*time.Second))
			if err == nil && ok {
				p.mu.Lock()
				p.confirmed = append(p.confirmed, body)
				p.mu.Unlock()
			}
		}
		select {
		case e := <-closed:
			p.mu.Lock()
			p.forced = append(p.forced, e)
			p.mu.Unlock()
		case <-time.After(5 * time.Second):
		}
		conn.Close()
	}
}

func TestDrainUndrain(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	c := adminClient(t, ms[0])
	drained := ms[2]

	ch := ms[0].Channel()
	var queues []string
	for i := range 6 {
		q := fmt.Sprintf("dr%d", i)
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
		queues = append(queues, q)
	}
	testwait.For(t, 20*time.Second, "the drained-to-be node leads a queue", func() bool { return drained.LeadingQueues() > 0 })

	// Traffic: a publisher on the node to drain (it must move to ms[0])
	// and a consumer on ms[1], both with confirms / acks.
	stop := make(chan struct{})
	pub := &drainPublisher{}
	var wg sync.WaitGroup
	wg.Go(func() { pub.run(t, []*nodetest.Member{drained, ms[0]}, "dr0", stop) })
	consumed := map[string]bool{}
	var cmu sync.Mutex
	cch := ms[1].Channel()
	deliveries, err := cch.Consume("dr0", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		for d := range deliveries {
			cmu.Lock()
			consumed[string(d.Body)] = true
			cmu.Unlock()
			d.Ack(false)
		}
	})
	testwait.For(t, 10*time.Second, "publishes confirmed", func() bool {
		pub.mu.Lock()
		defer pub.mu.Unlock()
		return len(pub.confirmed) > 20
	})

	resp, err := c.Drain(callCtx(t, 2*time.Minute), &adminpb.DrainRequest{Node: drained.Name()})
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	t.Logf("drain: %d moves, %d connections closed", len(resp.Moves), resp.ConnectionsClosed)
	if resp.ConnectionsClosed == 0 {
		t.Error("drain closed no client connection")
	}
	if n := drained.LeadingQueues(); n != 0 {
		t.Errorf("drained node leads %d queues", n)
	}
	// Its clients were told why, and refused afterwards.
	pub.mu.Lock()
	forced := slices.Clone(pub.forced)
	pub.mu.Unlock()
	if len(forced) == 0 || forced[0] == nil || forced[0].Code != amqp091.ConnectionForced {
		t.Errorf("publisher's connection closes: %v, want 320 CONNECTION_FORCED", forced)
	}
	if conn, err := amqp091.Dial("amqp://guest:guest@" + drained.AMQPAddr().String() + "/"); err == nil {
		conn.Close()
		t.Error("a drained node accepted a client connection")
	}
	// Cluster status shows it.
	st, err := c.ClusterStatus(callCtx(t, 5*time.Second), &adminpb.ClusterStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.Draining != (n.Name == drained.Name()) {
			t.Errorf("cluster status: %s draining %v", n.Name, n.Draining)
		}
	}
	// New queues, declared on either other node, leave it out.
	for i, m := range []*nodetest.Member{ms[0], ms[1], ms[0]} {
		q := fmt.Sprintf("after-drain%d", i)
		if _, err := m.Channel().QueueDeclare(q, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
		for _, on := range ms {
			testwait.For(t, 10*time.Second, "record on every node", func() bool {
				_, ok := on.Broker().QueueRecord("/", q)
				return ok
			})
			rec, _ := on.Broker().QueueRecord("/", q)
			if slices.Contains(rec.Members, drained.Name()) || rec.Leader == drained.Name() {
				t.Errorf("queue %s placed on the drained node: members %v leader %s", q, rec.Members, rec.Leader)
			}
		}
	}
	// Still leads nothing a while later (its replicas do not campaign).
	time.Sleep(2 * time.Second)
	if n := drained.LeadingQueues(); n != 0 {
		t.Errorf("drained node leads %d queues after a while", n)
	}

	close(stop)
	// Every confirmed message arrives.
	pub.mu.Lock()
	confirmed := slices.Clone(pub.confirmed)
	pub.mu.Unlock()
	testwait.For(t, 30*time.Second, "every confirmed message consumed", func() bool {
		cmu.Lock()
		defer cmu.Unlock()
		for _, b := range confirmed {
			if !consumed[b] {
				return false
			}
		}
		return true
	})
	cch.Close()

	// Undrain: placement and connections include it again.
	if _, err := c.Undrain(callCtx(t, time.Minute), &adminpb.DrainRequest{Node: drained.Name()}); err != nil {
		t.Fatalf("undrain: %v", err)
	}
	conn, err := amqp091.Dial("amqp://guest:guest@" + drained.AMQPAddr().String() + "/")
	if err != nil {
		t.Fatalf("undrained node refuses connections: %v", err)
	}
	conn.Close()
	if _, err := ms[0].Channel().QueueDeclare("after-undrain", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	rec, _ := ms[0].Broker().QueueRecord("/", "after-undrain")
	if !slices.Contains(rec.Members, drained.Name()) {
		t.Errorf("queue after undrain: members %v lack %s", rec.Members, drained.Name())
	}
	wg.Wait()
}

func TestForgetNode(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	c := adminClient(t, ms[0])
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("fg", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	gone := ms[2]
	name := gone.Name()
	if _, err := c.ForgetNode(callCtx(t, 10*time.Second), &adminpb.ForgetNodeRequest{Node: name}); err == nil {
		t.Fatal("forgetting an alive node succeeded")
	}
	gone.Kill()
	testwait.For(t, 20*time.Second, "gossip sees the node dead", func() bool {
		st, err := c.ClusterStatus(callCtx(t, 5*time.Second), &adminpb.ClusterStatusRequest{})
		return err == nil && slices.ContainsFunc(st.Nodes, func(n *adminpb.Node) bool { return n.Name == name && n.State == "dead" })
	})
	var resp *adminpb.MembershipResponse
	var err error
	testwait.For(t, 60*time.Second, "forget succeeds", func() bool {
		resp, err = c.ForgetNode(callCtx(t, 30*time.Second), &adminpb.ForgetNodeRequest{Node: name})
		if err != nil {
			t.Logf("forget: %v", err)
		}
		return err == nil
	})
	if !slices.Contains(resp.Changed, "//fg") && !slices.Contains(resp.Changed, "/fg") {
		t.Errorf("forget changed %v, want /fg", resp.Changed)
	}
	st, err := c.ClusterStatus(callCtx(t, 5*time.Second), &adminpb.ClusterStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(st.Nodes, func(n *adminpb.Node) bool { return n.Name == name }) {
		t.Errorf("cluster status still lists %s: %v", name, st.Nodes)
	}
	for _, m := range ms[:2] {
		testwait.For(t, 10*time.Second, "queue members without the forgotten node", func() bool {
			rec, ok := m.Broker().QueueRecord("/", "fg")
			return ok && !slices.Contains(rec.Members, name)
		})
	}
	if _, err := ch.QueueDeclarePassive("fg", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Errorf("queue after forget: %v", err)
	}
}

// TestStopHandsOffPastADrainedNode: a node that stops hands its queues'
// leadership to the node that is not drained, not to the drained one
// (which would only hand it on again, and another drained node back).
// The drained node is the one raft picks when all are equally caught up
// (the first in the configuration).
func TestStopHandsOffPastADrainedNode(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	const n = 4
	declareLed(t, ms, "past", n, ms[0])
	awaitFormed(t, ms, "past", n)
	if _, err := adminClient(t, ms[2]).Drain(callCtx(t, time.Minute), &adminpb.DrainRequest{Node: ms[1].Name()}); err != nil {
		t.Fatalf("drain: %v", err)
	}
	led := ms[0].LeadingQueues()
	if led == 0 {
		t.Fatalf("%s leads no queue after the drain", ms[0].Name())
	}
	ms[0].Stop()
	if got := ms[1].LeadingQueues(); got != 0 {
		t.Errorf("the drained node took %d leaderships from the stopping node", got)
	}
	testwait.For(t, 10*time.Second, "every queue led by "+ms[2].Name(), func() bool {
		return ms[2].LeadingQueues() == n
	})
}
