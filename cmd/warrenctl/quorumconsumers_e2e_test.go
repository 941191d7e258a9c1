package main

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestQuorumConsumersAgainstRealCluster: a single-active-consumer quorum
// queue with its active consumer on warren-1 and a waiting one on
// warren-2, as its leader lists them, asked through warren-0; then
// the active consumer is cancelled holding its messages and the waiting
// one takes over.
func TestQuorumConsumersAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("jobs", true, false, false, false,
		amqp091.Table{"x-queue-type": "quorum", "x-single-active-consumer": true}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		dc, err := ch.PublishWithDeferredConfirm("", "jobs", false, false, amqp091.Publishing{Body: []byte("x")})
		if err != nil || !dc.Wait() {
			t.Fatalf("publish: %v", err)
		}
	}
	consume := func(m *nodetest.Member, tag string) (*amqp091.Channel, <-chan amqp091.Delivery) {
		return consumeFrom(t, m, "jobs", tag, 2)
	}
	a, aDeliveries := consume(ms[1], "worker-a")
	for range 2 {
		<-aDeliveries
	}
	_, bDeliveries := consume(ms[2], "worker-b")
	node := ms[0].InternalAddr().String()

	var leader string
	list := func() map[string]quorumConsumerRow {
		var got map[string]quorumConsumerRow
		leader, got = quorumConsumersByStatus(t, node, "jobs")
		return got
	}
	var got map[string]quorumConsumerRow
	testwait.For(t, 10*time.Second, "an active consumer holding 2 and one waiting", func() bool {
		got = list()
		return len(got) == 2 && got["single active"].Held == 2 && got["waiting"].Status != ""
	})
	if leader == "" {
		t.Errorf("no leader named")
	}
	active, waiting := got["single active"], got["waiting"]
	if active.Tag == nil || *active.Tag != "worker-a" || *active.Node != ms[1].Name() || !*active.AckRequired || active.Credit != 2 {
		t.Errorf("active consumer: %+v", active)
	}
	if waiting.Tag == nil || *waiting.Tag != "worker-b" || *waiting.Node != ms[2].Name() || waiting.Held != 0 {
		t.Errorf("waiting consumer: %+v", waiting)
	}

	// Cancelled, worker-a keeps its two messages until its channel
	// settles them or closes; worker-b becomes active and takes two more.
	if err := a.Cancel("worker-a", false); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		<-bDeliveries
	}
	testwait.For(t, 10*time.Second, "worker-a cancelled holding 2, worker-b active holding 2", func() bool {
		got = list()
		return got["cancelled"].Held == 2 && got["single active"].Held == 2 && got["single active"].ID == waiting.ID
	})
	if got["cancelled"].ID != active.ID || got["cancelled"].Tag != nil {
		t.Errorf("cancelled consumer: %+v (was %+v)", got["cancelled"], active)
	}

	code, out, _ := warrenctl(t, "--node", node, "quorum", "consumers", "jobs")
	if code != 0 {
		t.Fatalf("quorum consumers: exit %d", code)
	}
	t.Logf("\n%s", out)
	code, _, errOut := warrenctl(t, "--node", node, "quorum", "consumers", "nope")
	if code != 1 || errOut != "warrenctl: queue 'nope' in vhost '/' not found\n" {
		t.Errorf("unknown queue: exit %d, %q", code, errOut)
	}
}

// TestQuorumConsumersSuspectedDown: a consumer on a node killed while it
// holds messages is listed suspected down, with its node, until the
// queue's consumer disconnected timeout returns what it held. A single
// active one keeps its place meanwhile and is handed nothing, nor is the
// consumer waiting behind it, which then gets the held messages first,
// their delivery-count unchanged.
func TestQuorumConsumersSuspectedDown(t *testing.T) {
	t.Run("competing", func(t *testing.T) { testSuspectedDown(t, false) })
	t.Run("single active", func(t *testing.T) { testSuspectedDown(t, true) })
}

func testSuspectedDown(t *testing.T, sac bool) {
	ms := nodetest.StartCluster(t, 3)
	args := amqp091.Table{"x-queue-type": "quorum", "x-consumer-disconnected-timeout": int64(4000)}
	if sac {
		args["x-single-active-consumer"] = true
	}
	if _, err := ms[0].Channel().QueueDeclare("held", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	// The consumer on a node that does not lead, asked through the third.
	leader := queueLeader(t, ms, "held")
	victim, asked := ms[(leader+1)%3], ms[(leader+2)%3]
	// The holder has credit left: a queue that handed a consumer away
	// messages would show it.
	_, ds := consumeFrom(t, victim, "held", "holder", 10)
	publish := func(from, to int) { publishLetters(t, ms[leader], "held", from, to) }
	publish(0, 5)
	for range 5 {
		<-ds
	}
	var waiting <-chan amqp091.Delivery
	if sac {
		_, waiting = consumeFrom(t, asked, "held", "next", 10)
	}
	list := func() map[string]quorumConsumerRow {
		_, got := quorumConsumersByStatus(t, asked.InternalAddr().String(), "held")
		return got
	}
	holding := "up"
	if sac {
		holding = "single active"
	}
	if rs := list(); rs[holding].Held != 5 {
		t.Fatalf("before the kill: %+v", rs)
	}
	victimName := victim.Name()
	victim.Kill()
	var rs map[string]quorumConsumerRow
	testwait.For(t, 3*time.Second, "the holder suspected down", func() bool {
		rs = list()
		return rs["suspected down"].Status != ""
	})
	if down := rs["suspected down"]; down.Node == nil || *down.Node != victimName || down.Held != 5 {
		t.Errorf("suspected down: %+v", down)
	}
	if !sac {
		testwait.For(t, 15*time.Second, "the five back in the queue after the timeout", func() bool {
			q, err := asked.Channel().QueueDeclarePassive("held", true, false, false, false, nil)
			return err == nil && q.Messages == 5 && len(list()) == 0
		})
		return
	}
	// Published meanwhile: nobody is handed them while the holder is
	// away; after the timeout the consumer waiting gets the held five
	// first, then these, in order.
	publish(5, 8)
	select {
	case d := <-waiting:
		t.Fatalf("the waiting consumer got %q while the active one was suspected down", d.Body)
	case <-time.After(2 * time.Second):
	}
	if rs := list(); rs["waiting"].Status == "" || rs["suspected down"].Held != 5 {
		t.Errorf("while suspected down: %+v", rs)
	}
	for i := range 8 {
		select {
		case d := <-waiting:
			// Returned on the timeout, no failed delivery counted, as
			// RabbitMQ 4.3 returns a suspected-down consumer's.
			if n, ok := d.Headers["x-delivery-count"]; d.Body[0] != byte('a'+i) || d.Redelivered != (i < 5) || (ok && n != int64(0)) {
				t.Fatalf("delivery %d to the next consumer: %q, redelivered %v, x-delivery-count %v", i, d.Body, d.Redelivered, n)
			}
			d.Ack(false)
		case <-time.After(15 * time.Second):
			t.Fatalf("the next consumer got %d of 8", i)
		}
	}
}

// queueLeader waits for queue (in vhost /) to elect a leader, and says
// which of ms it is.
func queueLeader(t *testing.T, ms []*nodetest.Member, queue string) int {
	t.Helper()
	var leader int
	testwait.For(t, 10*time.Second, "a leader of "+queue, func() bool {
		leader = slices.IndexFunc(ms, func(m *nodetest.Member) bool {
			st, ok := m.QueueMember("/", queue)
			return ok && st.State == "Leader"
		})
		return leader >= 0
	})
	return leader
}

// consumeFrom consumes queue through m with manual acks and prefetch.
func consumeFrom(t *testing.T, m *nodetest.Member, queue, tag string, prefetch int) (*amqp091.Channel, <-chan amqp091.Delivery) {
	t.Helper()
	ch := m.Channel()
	if err := ch.Qos(prefetch, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ch, ds
}

// publishLetters publishes messages from to to (bodies 'a'+i) to queue
// through m, each confirmed before the next.
func publishLetters(t *testing.T, m *nodetest.Member, queue string, from, to int) {
	t.Helper()
	pub := m.Channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := from; i < to; i++ {
		dc, err := pub.PublishWithDeferredConfirm("", queue, false, false, amqp091.Publishing{Body: []byte{byte('a' + i)}})
		if err != nil || !dc.Wait() {
			t.Fatalf("publish: %v", err)
		}
	}
}

// quorumConsumerRow is a row of quorum consumers --json.
type quorumConsumerRow struct {
	ID          uint64
	Status      string
	Node        *string
	Tag         *string `json:"consumer_tag"`
	AckRequired *bool   `json:"ack_required"`
	Held        uint32
	Credit      uint32
}

// quorumConsumersByStatus asks node for queue's consumers: the leader
// named, and the rows by status (one per status in these tests).
func quorumConsumersByStatus(t *testing.T, node, queue string) (string, map[string]quorumConsumerRow) {
	t.Helper()
	code, out, errOut := warrenctl(t, "--node", node, "--json", "quorum", "consumers", queue)
	if code != 0 {
		t.Fatalf("quorum consumers: exit %d: %s", code, errOut)
	}
	var r struct {
		Leader    string
		Consumers []quorumConsumerRow
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	byStatus := map[string]quorumConsumerRow{}
	for _, k := range r.Consumers {
		byStatus[k.Status] = k
	}
	return r.Leader, byStatus
}
