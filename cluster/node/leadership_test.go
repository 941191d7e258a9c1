package node_test

import (
	"context"
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

func callCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// queueLeader is the member that leads queue name, as its members report.
func queueLeader(t *testing.T, c adminpb.AdminClient, name string) string {
	t.Helper()
	var leader string
	testwait.For(t, 15*time.Second, "a leader of "+name, func() bool {
		st, err := c.QuorumStatus(callCtx(t, 5*time.Second), &adminpb.QuorumStatusRequest{Name: name})
		if err != nil {
			return false
		}
		leader = st.Leader
		return leader != ""
	})
	return leader
}

// TestTransferLeadershipUnderTraffic: a publisher with confirms and a
// consumer keep going while the queue's leadership moves twice; the leader
// changes as asked, and every confirmed message is delivered, none twice
// unmarked, and none again once the consumer has acknowledged it.
func TestTransferLeadershipUnderTraffic(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	if _, err := ms[0].Channel().QueueDeclare("moving", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	c := adminClient(t, ms[2])
	first := queueLeader(t, c, "moving")
	names := []string{ms[0].Name(), ms[1].Name(), ms[2].Name()}
	others := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == first })

	// The consumer, on node 1.
	sub := ms[1].Channel()
	if err := sub.Qos(20, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := sub.Consume("moving", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu        sync.Mutex
		received  = map[string]int{} // body → deliveries not marked redelivered
		delivered = map[string]bool{}
		acked     = map[string]bool{}
		// ackedAgain: delivered again after the consumer acked it. The
		// acks the old leader's deliveries get while the leadership moves
		// reach the new leader through the old one (replica/former.go).
		ackedAgain []string
	)
	go func() {
		for d := range deliveries {
			mu.Lock()
			if acked[string(d.Body)] {
				ackedAgain = append(ackedAgain, string(d.Body))
			}
			acked[string(d.Body)] = true
			if !d.Redelivered {
				received[string(d.Body)]++
			}
			delivered[string(d.Body)] = true
			mu.Unlock()
			d.Ack(false)
		}
	}()

	// The publisher, on node 0: one message at a time, each waiting for
	// its confirm.
	pub := ms[0].Channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	// A nacked publish (the broker could not store it in time) is
	// allowed, as AMQP allows it: it is not sent again, so it may be
	// delivered at most once, and need not be.
	var confirmed, nacked []string
	publish := func(n int) {
		for i := range n {
			body := fmt.Sprintf("m-%d-%d", n, i)
			dc, err := pub.PublishWithDeferredConfirmWithContext(callCtx(t, 30*time.Second), "", "moving", false, false,
				amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body)})
			if err != nil {
				t.Errorf("publish %s: %v", body, err)
				return
			}
			ok, err := dc.WaitContext(callCtx(t, 30*time.Second))
			switch {
			case err != nil:
				t.Errorf("publish %s: %v", body, err)
				return
			case ok:
				confirmed = append(confirmed, body)
			default:
				nacked = append(nacked, body)
			}
		}
	}
	transfer := func(to string) {
		t.Helper()
		resp, err := c.TransferLeadership(callCtx(t, 30*time.Second), &adminpb.TransferLeadershipRequest{Name: "moving", To: to})
		if err != nil {
			t.Fatalf("transfer to %s: %v", to, err)
		}
		if !resp.Moved || resp.To != to {
			t.Fatalf("transfer to %s: %v", to, resp)
		}
		// Answered once the new leader leads: every member agrees.
		if got := queueLeader(t, c, "moving"); got != to {
			t.Fatalf("leader %s after the transfer to %s", got, to)
		}
	}

	publish(100)
	done := make(chan struct{})
	go func() { // publishes in flight during both transfers
		defer close(done)
		publish(300)
	}()
	time.Sleep(50 * time.Millisecond) // the publishes under way before the first transfer
	transfer(others[0])
	transfer(others[1])
	<-done
	if st, err := c.QuorumStatus(callCtx(t, 5*time.Second), &adminpb.QuorumStatusRequest{Name: "moving"}); err != nil || st.Leader != others[1] {
		t.Fatalf("leader: %v, %v", st, err)
	}

	testwait.For(t, 30*time.Second, "every confirmed message delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range confirmed {
			if !delivered[b] {
				return false
			}
		}
		return true
	})
	mu.Lock()
	if len(ackedAgain) > 0 {
		t.Errorf("delivered again after the consumer acknowledged them: %v", ackedAgain)
	}
	for b, n := range received {
		if n > 1 {
			t.Errorf("%s delivered %d times unmarked", b, n)
		}
	}
	for b := range delivered {
		if !slices.Contains(confirmed, b) && !slices.Contains(nacked, b) {
			t.Errorf("%s delivered, never published", b)
		}
	}
	mu.Unlock()
	if len(nacked) > 0 {
		t.Logf("%d of %d publishes nacked: %v", len(nacked), len(confirmed)+len(nacked), nacked)
	}
	if len(confirmed) < 350 {
		t.Errorf("only %d of 400 publishes confirmed", len(confirmed))
	}
	testwait.For(t, 15*time.Second, "every ack to reach the leader", func() bool {
		q, err := ms[2].Channel().QueueDeclarePassive("moving", true, false, false, false, quorum)
		return err == nil && q.Messages == 0
	})
}

// TestRebalance: nine queues declared client-local on one node all lead
// there; a rebalance asked of another node spreads them three to a node,
// with their messages intact.
func TestRebalance(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ch := ms[1].Channel()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	args := amqp091.Table{"x-queue-type": "quorum", "x-queue-leader-locator": "client-local"}
	const queues, messages = 9, 10
	for i := range queues {
		q := fmt.Sprintf("rb%d", i)
		if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
		for j := range messages {
			dc, err := ch.PublishWithDeferredConfirm("", q, false, false, amqp091.Publishing{Body: []byte(fmt.Sprintf("%s-%d", q, j))})
			if err != nil || !dc.Wait() {
				t.Fatalf("publish to %s: %v", q, err)
			}
		}
	}
	testwait.For(t, 30*time.Second, "every queue led by "+ms[1].Name(), func() bool {
		return ms[1].LeadingQueues() == queues
	})

	resp, err := adminClient(t, ms[0]).Rebalance(callCtx(t, 2*time.Minute), &adminpb.RebalanceRequest{QueuePattern: "^rb"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("moves: %v", resp.Moves)
	for _, m := range resp.Moves {
		if m.Error != "" || m.From != ms[1].Name() {
			t.Errorf("move %v", m)
		}
	}
	if len(resp.Moves) != 6 {
		t.Errorf("%d moves, want 6", len(resp.Moves))
	}
	for _, n := range resp.Nodes {
		if n.After != 3 {
			t.Errorf("node %v", n)
		}
	}
	for _, m := range ms {
		if l := m.LeadingQueues(); l < 2 || l > 4 {
			t.Errorf("%s leads %d", m.Name(), l)
		}
	}

	get := ms[2].Channel()
	for i := range queues {
		q := fmt.Sprintf("rb%d", i)
		for j := range messages {
			var d amqp091.Delivery
			testwait.For(t, 10*time.Second, "a message of "+q, func() bool {
				var ok bool
				var err error
				d, ok, err = get.Get(q, true)
				return err == nil && ok
			})
			if want := fmt.Sprintf("%s-%d", q, j); string(d.Body) != want {
				t.Errorf("got %q, want %q", d.Body, want)
			}
		}
		if _, ok, err := get.Get(q, true); ok || err != nil {
			t.Errorf("%s: an extra message (%v)", q, err)
		}
	}
}

// TestHealthChecks: with one node of three stopped, each queue is quorum
// critical on each remaining member and none is leaderless; with two
// stopped, every queue is leaderless.
func TestHealthChecks(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	for i := range 3 {
		if _, err := ch.QueueDeclare(fmt.Sprintf("hc%d", i), true, false, false, false, quorum); err != nil {
			t.Fatal(err)
		}
	}
	c := adminClient(t, ms[0])
	for i := range 3 {
		queueLeader(t, c, fmt.Sprintf("hc%d", i))
	}
	check := func(node string) []string {
		resp, err := c.CheckQuorumCritical(callCtx(t, 10*time.Second), &adminpb.CheckQuorumCriticalRequest{Node: node})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range resp.Queues {
			names = append(names, q.Name)
		}
		return names
	}
	leaderless := func() []string {
		resp, err := c.CheckLeaderless(callCtx(t, 10*time.Second), &adminpb.CheckLeaderlessRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range resp.Queues {
			names = append(names, q.Name)
		}
		return names
	}
	all := []string{"hc0", "hc1", "hc2"}
	for _, m := range ms {
		if got := check(m.Name()); len(got) != 0 {
			t.Errorf("all up: %s critical for %v", m.Name(), got)
		}
	}
	if got := leaderless(); len(got) != 0 {
		t.Errorf("all up: leaderless %v", got)
	}

	stopped := ms[2].Name()
	ms[2].Stop()
	testwait.For(t, 20*time.Second, "the others to be quorum critical", func() bool {
		return slices.Equal(check(ms[0].Name()), all) && slices.Equal(check(ms[1].Name()), all)
	})
	if got := check(stopped); len(got) != 0 {
		t.Errorf("stopped %s critical for %v", stopped, got)
	}
	testwait.For(t, 20*time.Second, "every queue led by the two left", func() bool {
		return len(leaderless()) == 0
	})

	ms[1].Stop()
	testwait.For(t, 60*time.Second, "every queue leaderless", func() bool {
		return slices.Equal(leaderless(), all)
	})
}
