package forward_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
	"github.com/warrenmq/warren/raftq/testwait"
)

var testLog = slog.New(slog.NewTextHandler(logOut(), &slog.HandlerOptions{Level: slog.LevelDebug}))

func logOut() io.Writer {
	if os.Getenv("FORWARD_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// node is one cluster node's forwarding side: a gRPC server with a
// forward.Server, and a peer pool.
type node struct {
	t      *testing.T
	name   string
	addr   string
	pool   *rpc.Pool
	mu     sync.Mutex
	queues map[string]forward.Local
	g      *grpc.Server
	srv    *forward.Server
	// Faults on the link into this node: the answers of the next
	// loseGetAnswers Gets are lost after the get ran (the caller sees the
	// link fail), and Settle calls fail unread while refuseSettles.
	loseGetAnswers atomic.Int32
	refuseSettles  atomic.Bool
	// loseStreamSettlements drops the settlements consume streams carry
	// in, as a leader that lost them with its leadership would.
	loseStreamSettlements atomic.Bool
	// refuseConsume fails new consume streams as a cut link would;
	// breakStreams ends the open ones here as a broken link would.
	refuseConsume atomic.Bool
	// holdConsume serves a new consume stream's attach only once the
	// caller has given up on it, as a leader whose commits stalled does.
	holdConsume atomic.Bool
	// deliveryReplies counts the consume stream messages carrying
	// deliveries sent out of this node.
	deliveryReplies atomic.Int64
	streamsMu       sync.Mutex
	streamCancels   []context.CancelFunc
}

func newNode(t *testing.T, name string) *node {
	n := &node{t: t, name: name, queues: make(map[string]forward.Local)}
	n.pool = rpc.NewPool(grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 200 * time.Millisecond},
		MinConnectTimeout: time.Second,
	}))
	n.start("127.0.0.1:0")
	t.Cleanup(func() {
		n.stop()
		n.pool.Close()
	})
	return n
}

func (n *node) start(addr string) {
	n.t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		n.t.Fatal(err)
	}
	g := grpc.NewServer(append(rpc.ServerOptions(), grpc.ChainUnaryInterceptor(n.faults), grpc.ChainStreamInterceptor(n.streamFaults))...)
	srv := forward.NewServer(n.lookup, testLog)
	srv.Register(g)
	n.mu.Lock()
	n.addr = lis.Addr().String()
	n.g, n.srv = g, srv
	n.mu.Unlock()
	go g.Serve(lis)
}

// faults cuts the link for the calls loseGetAnswers and refuseSettles
// name, as a partition would: the caller gets Unavailable.
func (n *node) faults(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	cut := status.Error(codes.Unavailable, "test: link cut")
	switch path.Base(info.FullMethod) {
	case "Settle":
		if n.refuseSettles.Load() {
			return nil, cut
		}
	case "Get":
		rep, err := handler(ctx, req)
		if err == nil && n.loseGetAnswers.Add(-1) >= 0 {
			return nil, cut
		}
		return rep, err
	}
	return handler(ctx, req)
}

func (n *node) streamFaults(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if path.Base(info.FullMethod) == "Consume" && n.refuseConsume.Load() {
		return status.Error(codes.Unavailable, "test: link cut")
	}
	if path.Base(info.FullMethod) == "Consume" && n.holdConsume.Load() {
		first := new(queuepb.ConsumeRequest)
		if err := ss.RecvMsg(first); err != nil {
			return err
		}
		<-ss.Context().Done()
		return handler(srv, &faultyStream{ServerStream: ss, n: n, ctx: ss.Context(), first: first})
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	n.streamsMu.Lock()
	n.streamCancels = append(n.streamCancels, cancel)
	n.streamsMu.Unlock()
	return handler(srv, &faultyStream{ServerStream: ss, n: n, ctx: ctx})
}

// breakStreams ends every stream open into n, as if its link broke: the
// serving side sees its context end, not a goodbye.
func (n *node) breakStreams() {
	n.streamsMu.Lock()
	cancels := n.streamCancels
	n.streamCancels = nil
	n.streamsMu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}

type faultyStream struct {
	grpc.ServerStream
	n     *node
	ctx   context.Context
	first *queuepb.ConsumeRequest // received already (holdConsume)
}

func (s *faultyStream) Context() context.Context { return s.ctx }

func (s *faultyStream) RecvMsg(m any) error {
	if req, ok := m.(*queuepb.ConsumeRequest); ok && s.first != nil {
		proto.Merge(req, s.first)
		s.first = nil
		return nil
	}
	err := s.ServerStream.RecvMsg(m)
	if req, ok := m.(*queuepb.ConsumeRequest); ok && err == nil && s.n.loseStreamSettlements.Load() {
		req.Settlements = nil
	}
	return err
}

func (s *faultyStream) SendMsg(m any) error {
	if reply, ok := m.(*queuepb.ConsumeReply); ok && len(reply.Deliveries) > 0 {
		s.n.deliveryReplies.Add(1)
	}
	return s.ServerStream.SendMsg(m)
}

func (n *node) stop() {
	n.mu.Lock()
	g := n.g
	n.g = nil
	n.mu.Unlock()
	if g != nil {
		g.Stop()
	}
}

func (n *node) lookup(id string) (forward.Local, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.queues[id]
	return l, ok
}

// openReplica opens a one-member group on n for queue id.
func (n *node) openReplica(id string) *replica.Replica {
	return n.openReplicaWith(id, replica.Config{})
}

// openReplicaWith is openReplica with cfg's settings.
func (n *node) openReplicaWith(id string, cfg replica.Config) *replica.Replica {
	n.t.Helper()
	cfg.Name, cfg.Dir, cfg.NodeID, cfg.Created, cfg.Log = "/"+id, n.t.TempDir(), n.name, 1, testLog
	r, err := replica.Open(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	n.mu.Lock()
	n.queues[id] = r
	n.mu.Unlock()
	n.t.Cleanup(r.Close)
	return r
}

type cluster map[string]*node

func (c cluster) addr(name string) (string, bool) {
	n, ok := c[name]
	if !ok {
		return "", false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addr, true
}

func (c cluster) router(t *testing.T, on, id string, local forward.Local, timeout time.Duration) *forward.Router {
	r := forward.NewRouter(forward.RouterConfig{
		QueueID: id, Name: "/" + id, Members: []string{"b"}, Local: local,
		Addr: c.addr, Pool: c[on].pool, PublishTimeout: timeout, Log: testLog,
	})
	t.Cleanup(r.Close)
	return r
}

// testConsumer records what a queue gives it.
type testConsumer struct {
	mu        sync.Mutex
	ds        []queue.Delivery
	gone      int
	timedOut  int
	leaderHop int
}

func (c *testConsumer) Deliver(d queue.Delivery) bool {
	c.mu.Lock()
	c.ds = append(c.ds, d)
	c.mu.Unlock()
	return true
}
func (c *testConsumer) Gone() { c.mu.Lock(); c.gone++; c.mu.Unlock() }
func (c *testConsumer) TimedOut(time.Duration) {
	c.mu.Lock()
	c.timedOut++
	c.mu.Unlock()
}

func (c *testConsumer) deliveries() []queue.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]queue.Delivery(nil), c.ds...)
}

func (c *testConsumer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ds)
}

func (c *testConsumer) gones() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone
}

// confirms collects done callbacks.
type confirms struct {
	mu   sync.Mutex
	errs []error
}

func (c *confirms) done() func(error) {
	return func(err error) {
		c.mu.Lock()
		c.errs = append(c.errs, err)
		c.mu.Unlock()
	}
}

func (c *confirms) counts() (ok, failed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, err := range c.errs {
		if err == nil {
			ok++
		} else {
			failed++
		}
	}
	return ok, failed
}

func msg(i int) *queue.Message {
	m := &queue.Message{Exchange: "ex", RoutingKey: "rk", Body: []byte(fmt.Sprintf("m%d", i))}
	m.Properties.ContentType = "text/plain"
	m.Properties.Headers = map[string]any{"i": int32(i)}
	return m
}

func publish(t *testing.T, q queue.Queue, from, n int, c *confirms) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := q.Enqueue(context.Background(), msg(i), c.done()); err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
	}
}

func ids(ds []queue.Delivery) []uint64 {
	out := make([]uint64, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func twoNodes(t *testing.T) (cluster, *replica.Replica) {
	c := cluster{"a": newNode(t, "a"), "b": newNode(t, "b")}
	return c, c["b"].openReplica("q1")
}

func TestRemotePublishConsumeSettle(t *testing.T) {
	c, rep := twoNodes(t)
	r := c.router(t, "a", "q1", nil, 0)
	tc := &testConsumer{}
	if err := r.Consume(tc, queue.ConsumeOptions{Tag: "c1", Prefetch: 1000, Arguments: map[string]any{"x-priority": int32(1)}}); err != nil {
		t.Fatal(err)
	}
	var conf confirms
	const n = 300
	publish(t, r, 0, n, &conf)
	testwait.For(t, 10*time.Second, "confirms", func() bool { ok, _ := conf.counts(); return ok == n })
	testwait.For(t, 10*time.Second, "deliveries", func() bool { return tc.count() == n })
	ds := tc.deliveries()
	for i, d := range ds {
		if string(d.Message.Body) != fmt.Sprintf("m%d", i) || d.Message.Exchange != "ex" || d.Message.RoutingKey != "rk" ||
			d.Message.Properties.ContentType != "text/plain" || d.Message.Properties.Headers["i"] != int32(i) || d.Redelivered {
			t.Fatalf("delivery %d: %+v", i, d)
		}
	}
	// Requeue the first: it comes back redelivered.
	r.Requeue(ids(ds[:1]), queue.ReturnNack)
	testwait.For(t, 10*time.Second, "redelivery", func() bool { return tc.count() == n+1 })
	re := tc.deliveries()[n]
	if !re.Redelivered || string(re.Message.Body) != "m0" {
		t.Fatalf("redelivery: %+v", re)
	}
	// Discard the second, settle the rest.
	r.Discard(ids(ds[1:2]), queue.ReturnReject)
	r.Settle(append(ids(ds[2:]), re.ID))
	testwait.For(t, 10*time.Second, "everything settled", func() bool {
		st := rep.Stats()
		return st.Ready == 0 && st.Unacked == 0 && st.Consumers == 1
	})
	if st := r.Stats(); st.Consumers != 1 || st.Ready != 0 {
		t.Fatalf("router stats %+v", st)
	}
	r.Cancel(tc)
	testwait.For(t, 10*time.Second, "cancel", func() bool { return rep.Stats().Consumers == 0 })
	publish(t, r, n, 1, &conf)
	testwait.For(t, 10*time.Second, "confirm", func() bool { ok, _ := conf.counts(); return ok == n+1 })
	time.Sleep(50 * time.Millisecond) // time for a wrongful delivery to arrive: nothing to wait on
	if tc.count() != n+1 {
		t.Fatalf("delivery after cancel")
	}
	if st := r.Stats(); st.Ready != 1 {
		t.Fatalf("stats after cancel %+v", st)
	}
}

func TestRemoteGetPurgeStats(t *testing.T) {
	c, rep := twoNodes(t)
	r := c.router(t, "a", "q1", nil, 0)
	if _, _, ok, err := r.Get(false); ok || err != nil {
		t.Fatalf("get on empty: %v %v", ok, err)
	}
	var conf confirms
	publish(t, r, 0, 5, &conf)
	testwait.For(t, 10*time.Second, "confirms", func() bool { ok, _ := conf.counts(); return ok == 5 })
	d, remaining, ok, err := r.Get(false)
	if err != nil || !ok || remaining != 4 || string(d.Message.Body) != "m0" || d.ID == 0 {
		t.Fatalf("get: %+v %d %v %v", d, remaining, ok, err)
	}
	if st := r.Stats(); st.Ready != 4 || st.Unacked != 1 {
		t.Fatalf("stats %+v", st)
	}
	r.Settle([]uint64{d.ID})
	testwait.For(t, 10*time.Second, "get settled", func() bool { return rep.Stats().Unacked == 0 })
	if d, _, ok, err := r.Get(true); err != nil || !ok || string(d.Message.Body) != "m1" {
		t.Fatalf("get no-ack: %+v %v %v", d, ok, err)
	}
	n, err := r.Purge()
	if err != nil || n != 3 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if st := r.Stats(); st != (queue.Stats{}) {
		t.Fatalf("stats after purge %+v", st)
	}
}

func TestExclusiveConsumerRefused(t *testing.T) {
	c, _ := twoNodes(t)
	r := c.router(t, "a", "q1", nil, 0)
	if err := r.Consume(&testConsumer{}, queue.ConsumeOptions{Tag: "x", Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	err := r.Consume(&testConsumer{}, queue.ConsumeOptions{Tag: "y"})
	if !errors.Is(err, queue.ErrExclusiveConsumer) {
		t.Fatalf("second consumer: %v", err)
	}
}

func TestDeleteTellsConsumersGone(t *testing.T) {
	c, rep := twoNodes(t)
	ra := c.router(t, "a", "q1", nil, 0)
	rb := c.router(t, "b", "q1", rep, 0)
	ta, tb := &testConsumer{}, &testConsumer{}
	if err := ra.Consume(ta, queue.ConsumeOptions{Tag: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := rb.Consume(tb, queue.ConsumeOptions{Tag: "b"}); err != nil {
		t.Fatal(err)
	}
	var conf confirms
	publish(t, ra, 0, 4, &conf)
	testwait.For(t, 10*time.Second, "deliveries", func() bool { return ta.count()+tb.count() == 4 })
	if _, err := ra.Delete(false, false); err != nil {
		t.Fatal(err)
	}
	if ta.gones() != 1 {
		t.Fatalf("router a consumer gone %d", ta.gones())
	}
	if _, err := rb.Delete(false, false); err != nil {
		t.Fatal(err)
	}
	if tb.gones() != 1 {
		t.Fatalf("router b consumer gone %d", tb.gones())
	}
	if err := ra.Enqueue(context.Background(), msg(9), nil); !errors.Is(err, queue.ErrDeleted) {
		t.Fatalf("enqueue after delete: %v", err)
	}
}

// A member's Delete reaches a remote router's consumer through its stream.
func TestLeaderDeleteReachesRemoteConsumer(t *testing.T) {
	// Replica.Delete shuts raft down before it calls Gone, and its
	// leadership watcher calls LeaderLost first (onFollowing): the stream
	// then ends with NOT_LEADER and the router keeps re-attaching until
	// its own Delete. Enable once the replica skips onFollowing while
	// stopping.
	c, rep := twoNodes(t)
	ra := c.router(t, "a", "q1", nil, 0)
	ta := &testConsumer{}
	if err := ra.Consume(ta, queue.ConsumeOptions{Tag: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rep.Delete(false, false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "gone", func() bool { return ta.gones() == 1 })
}

func TestBackpressureWhenLeaderUnreachable(t *testing.T) {
	a := newNode(t, "a")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	c := cluster{"a": a, "b": &node{addr: dead}}
	r := c.router(t, "a", "q1", nil, time.Minute)
	body := make([]byte, 1<<20)
	var failed confirms
	for i := 0; i < 32; i++ {
		if err := r.Enqueue(context.Background(), &queue.Message{Body: body}, failed.done()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = r.Enqueue(ctx, &queue.Message{Body: body}, failed.done())
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("enqueue over the limit: %v after %v", err, time.Since(start))
	}
	if ok, bad := failed.counts(); ok != 0 || bad != 1 {
		t.Fatalf("callbacks: %d ok, %d failed", ok, bad)
	}
}

func TestLeaderOutageAndRestart(t *testing.T) {
	c, rep := twoNodes(t)
	r := c.router(t, "a", "q1", nil, time.Second)
	tc := &testConsumer{}
	if err := r.Consume(tc, queue.ConsumeOptions{Tag: "c"}); err != nil {
		t.Fatal(err)
	}
	var before confirms
	publish(t, r, 0, 10, &before)
	testwait.For(t, 10*time.Second, "first deliveries", func() bool { return tc.count() == 10 })
	r.Settle(ids(tc.deliveries()))

	b := c["b"]
	addr, _ := c.addr("b")
	b.stop()
	var during confirms
	publish(t, r, 10, 10, &during)
	time.Sleep(300 * time.Millisecond) // well inside the publish timeout: nothing answered yet
	if ok, bad := during.counts(); ok != 0 || bad != 0 {
		t.Fatalf("while the leader is down: %d confirmed, %d failed", ok, bad)
	}
	testwait.For(t, 10*time.Second, "publish timeouts", func() bool { _, bad := during.counts(); return bad == 10 })
	if ok, _ := during.counts(); ok != 0 {
		t.Fatalf("%d confirmed without a leader", ok)
	}

	b.start(addr)
	var after confirms
	publish(t, r, 20, 10, &after)
	testwait.For(t, 15*time.Second, "confirms after restart", func() bool { ok, _ := after.counts(); return ok == 10 })
	testwait.For(t, 15*time.Second, "deliveries after restart", func() bool {
		for _, d := range tc.deliveries() {
			if string(d.Message.Body) == "m29" {
				return true
			}
		}
		return false
	})
	testwait.For(t, 10*time.Second, "one consumer", func() bool { return rep.Stats().Consumers == 1 })
}

func TestLocalFastPath(t *testing.T) {
	c := cluster{"b": newNode(t, "b")}
	rep := c["b"].openReplica("q1")
	r := c.router(t, "b", "q1", rep, 0)
	tc := &testConsumer{}
	if err := r.Consume(tc, queue.ConsumeOptions{Tag: "c", Prefetch: 100}); err != nil {
		t.Fatal(err)
	}
	var conf confirms
	const n = 200
	publish(t, r, 0, n, &conf)
	testwait.For(t, 10*time.Second, "confirms", func() bool { ok, _ := conf.counts(); return ok == n })
	testwait.For(t, 10*time.Second, "deliveries", func() bool { return tc.count() >= 100 })
	r.Settle(ids(tc.deliveries()))
	testwait.For(t, 10*time.Second, "all delivered", func() bool { return tc.count() == n })
	r.Settle(ids(tc.deliveries()[100:]))
	testwait.For(t, 10*time.Second, "settled", func() bool { st := r.Stats(); return st.Unacked == 0 && st.Ready == 0 })
	r.Cancel(tc)
	publish(t, r, n, 2, &conf)
	testwait.For(t, 10*time.Second, "confirms", func() bool { ok, _ := conf.counts(); return ok == n+2 })
	d, _, ok, err := r.Get(false)
	if err != nil || !ok || string(d.Message.Body) != fmt.Sprintf("m%d", n) {
		t.Fatalf("get: %+v %v %v", d, ok, err)
	}
	r.Requeue([]uint64{d.ID}, queue.ReturnNack)
	testwait.For(t, 10*time.Second, "requeued", func() bool { return r.Stats().Ready == 2 })
	if got, err := r.Purge(); err != nil || got != 2 {
		t.Fatalf("purge %d %v", got, err)
	}
	t2 := &testConsumer{}
	if err := r.Consume(t2, queue.ConsumeOptions{Tag: "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Delete(false, false); err != nil {
		t.Fatal(err)
	}
	if t2.gones() != 1 {
		t.Fatalf("gone %d", t2.gones())
	}
}
