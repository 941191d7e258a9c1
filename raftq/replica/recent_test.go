package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestPayloadCacheBoundsTheNode: two queues sharing a node's payload cache
// keep no more than its limit at hand together, however much they hold;
// every message is still delivered, the rest read back from the log; and
// a closed queue gives its share back.
func TestPayloadCacheBoundsTheNode(t *testing.T) {
	const limit = 48 << 10
	shared := NewPayloadCache(limit)
	open := func() *Replica {
		cfg := Config{Name: "test/q", Dir: t.TempDir(), NodeID: "n1", Created: 1, Log: testLog("n1"), Payloads: shared}
		r, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := open(), open()
	defer b.Close()
	body := make([]byte, 1000)
	for _, r := range []*Replica{a, b} {
		for i := range 100 {
			copy(body, fmt.Sprintf("m%d ", i))
			publishBody(t, r, body)
		}
	}
	if used := shared.Used(); used > limit || used < limit/2 {
		t.Fatalf("the node keeps %d bytes of payloads, want at most %d (and near it)", used, limit)
	}
	kept := a.storage.recent.bytes
	c := &fakeConsumer{}
	if err := a.Consume(c, queue.ConsumeOptions{Prefetch: 200}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "100 deliveries", func() bool { return len(c.ids()) == 100 })
	for i, d := range c.deliveries() {
		if want := fmt.Sprintf("m%d ", i); string(d.Message.Body[:len(want)]) != want {
			t.Fatalf("delivery %d is %q, want %q", i, d.Message.Body[:8], want)
		}
	}
	if a.storage.recent.bytes != 0 {
		t.Fatalf("queue a still keeps %d bytes after delivering everything", a.storage.recent.bytes)
	}
	if kept == 0 {
		t.Fatal("queue a kept no payload before delivering")
	}
	// Room again: b keeps what arrives now, until it closes.
	publishBody(t, b, body)
	if shared.Used() == 0 {
		t.Fatal("queue b keeps nothing with the node's cache empty")
	}
	a.Close()
	b.Close()
	if got := shared.Used(); got != 0 {
		t.Fatalf("payloads kept after both closed: %d", got)
	}
}

// publishBody enqueues one message with body and waits for its commit.
func publishBody(t *testing.T, r *Replica, body []byte) {
	t.Helper()
	done := make(chan error, 1)
	msg := &queue.Message{RoutingKey: "q", Body: append([]byte(nil), body...)}
	if err := r.Enqueue(t.Context(), msg, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFormerLeaderForgetsPayloads: a leader keeps the payloads of messages
// not yet delivered; once it hands the leadership over it keeps none (its
// successor delivers them, from its own log). The members share one
// cache: followers keep nothing either.
func TestFormerLeaderForgetsPayloads(t *testing.T) { eachStorage(t, testFormerLeaderForgetsPayloads) }

func testFormerLeaderForgetsPayloads(t *testing.T, st storage) {
	shared := NewPayloadCache(DefaultPayloadCache)
	g := newGroupWith(t, st, func(_ string, cfg *Config) { cfg.Payloads = shared })
	name, lead := g.leader()
	for range 20 {
		publishBody(t, lead, []byte("held for a consumer to come"))
	}
	if shared.Used() == 0 {
		t.Fatal("the leader keeps no payload of the 20 undelivered messages")
	}
	var to string
	for _, n := range g.names {
		if n != name {
			to = n
			break
		}
	}
	if err := lead.TransferLeadership(to, to); err != nil && err != raft.ErrNotLeader {
		t.Fatal(err)
	}
	testwait.ForNil(t, 10*time.Second, "the former leader to keep no bytes", func() error {
		if used := shared.Used(); used != 0 {
			return fmt.Errorf("it keeps %d (leads: %v)", used, lead.IsLeader())
		}
		return nil
	})
}
