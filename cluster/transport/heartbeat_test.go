package transport

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/raftq/testwait"
)

// groupPairs registers n groups on nodes a and b of h; on b each group's
// heartbeat handler is answer(i, rpc).
func groupPairs(t *testing.T, h *harness, n int, answer func(i int, rpc raft.RPC)) (as, bs []*Transport) {
	t.Helper()
	a, b := h.nodes[0], h.nodes[1]
	for i := range n {
		g := fmt.Sprintf("g%03d", i)
		ta, err := a.mux.Transport(g)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := b.mux.Transport(g)
		if err != nil {
			t.Fatal(err)
		}
		tb.SetHeartbeatHandler(func(rpc raft.RPC) { answer(i, rpc) })
		t.Cleanup(func() { _ = ta.Close(); _ = tb.Close() })
		as, bs = append(as, ta), append(bs, tb)
	}
	return as, bs
}

// acceptHeartbeat is a follower's heartbeat handler that accepts every
// heartbeat, answering in its term.
func acceptHeartbeat(_ int, rpc raft.RPC) {
	req := rpc.Command.(*raft.AppendEntriesRequest)
	rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: true}, nil)
}

func heartbeatOf(ta *Transport, term uint64) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n0"), Addr: []byte(ta.LocalAddr())},
		Term:      term,
		Leader:    []byte(ta.LocalAddr()),
	}
}

// The heartbeats of many groups waiting at once share calls, and each
// gets its own group's answer.
func TestHeartbeatsBatched(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2, nil, nil)
	b := h.nodes[1]
	const n = 200
	release := make(chan struct{})
	as, _ := groupPairs(t, h, n, func(i int, rpc raft.RPC) {
		if i == 0 {
			<-release // hold the first call in flight
		}
		req := rpc.Command.(*raft.AppendEntriesRequest)
		rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: uint64(i), Success: i%2 == 0}, nil)
	})

	errs := make(chan error, n)
	send := func(i int) {
		var resp raft.AppendEntriesResponse
		err := as[i].AppendEntries(b.id, raft.ServerAddress(b.addr), heartbeatOf(as[i], uint64(1000+i)), &resp)
		if err == nil && (resp.Term != uint64(1000+i) || resp.LastLog != uint64(i) || resp.Success != (i%2 == 0)) {
			err = fmt.Errorf("group %d got %+v", i, resp)
		}
		errs <- err
	}
	go send(0)
	testwait.ForNil(t, 5*time.Second, "the first call", func() error {
		if h.nodes[1].mux.hbServed.Load() == 0 {
			return fmt.Errorf("not served yet")
		}
		return nil
	})
	for i := 1; i < n; i++ {
		go send(i)
	}
	// Every other heartbeat is queued behind the first call.
	testwait.ForNil(t, 5*time.Second, "queued heartbeats", func() error {
		ph := h.nodes[0].mux.heartbeats(b.addr, defaultHeartbeatLinger)
		ph.mu.Lock()
		defer ph.mu.Unlock()
		if len(ph.queue) < n-1 {
			return fmt.Errorf("%d queued", len(ph.queue))
		}
		return nil
	})
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if calls := b.mux.hbServed.Load(); calls != 2 {
		t.Fatalf("%d heartbeats took %d calls, want 2", n, calls)
	}

	// A lone heartbeat goes at once.
	start := time.Now()
	go send(5)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a lone heartbeat took %v", d)
	}
}

// Groups that linger longer share calls among themselves: heartbeats sent
// within one linger of each other take one call, and a group with the
// default linger is not held up by them (its own call).
func TestHeartbeatsLingerPerGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2, nil, nil)
	b := h.nodes[1]
	const n = 6
	as, _ := groupPairs(t, h, n, acceptHeartbeat)
	const long = 2 * time.Second // far more than starting n-1 goroutines takes
	for _, ta := range as[:n-1] {
		ta.SetHeartbeatLinger(long)
	}
	errs := make(chan error, n)
	send := func(i int) {
		var resp raft.AppendEntriesResponse
		err := as[i].AppendEntries(b.id, raft.ServerAddress(b.addr), heartbeatOf(as[i], 7), &resp)
		if err == nil && (resp.Term != 7 || !resp.Success) {
			err = fmt.Errorf("group %d got %+v", i, resp)
		}
		errs <- err
	}
	for i := range n - 1 {
		go send(i)
	}
	// The default-linger group's heartbeat goes (and is answered) while
	// the others still linger.
	send(n - 1)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if calls := b.mux.hbServed.Load(); calls != 1 {
		t.Fatalf("%d calls before the long linger ended, want 1 (the default group's)", calls)
	}
	for range n - 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if calls := b.mux.hbServed.Load(); calls != 2 {
		t.Fatalf("%d calls in all, want 2", calls)
	}
}

// A peer's sender stops once its call leaves nothing queued, rather than
// linger again only to find the queue empty (a timer wake-up per call on
// an idle node), and calls keep their rhythm: the next heartbeat goes a
// linger after the last call, not a linger after it arrived.
func TestHeartbeatSenderStopsAfterItsCall(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2, nil, nil)
	b := h.nodes[1]
	as, _ := groupPairs(t, h, 1, acceptHeartbeat)
	const linger = time.Second // the checks below leave it 400-500 ms either way
	as[0].SetHeartbeatLinger(linger)
	ph := h.nodes[0].mux.heartbeats(b.addr, linger)
	sending := func() bool {
		ph.mu.Lock()
		defer ph.mu.Unlock()
		return ph.sending
	}
	beat := func() time.Duration {
		start := time.Now()
		var resp raft.AppendEntriesResponse
		if err := as[0].AppendEntries(b.id, raft.ServerAddress(b.addr), heartbeatOf(as[0], 3), &resp); err != nil || !resp.Success {
			t.Fatalf("heartbeat: %v, %+v", err, resp)
		}
		return time.Since(start)
	}
	if d := beat(); d < linger {
		t.Fatalf("the first heartbeat was answered after %v, before the linger (%v)", d, linger)
	}
	answered := time.Now()
	// The sender hands out the answers, then stops: well within the
	// linger the old sender slept again for.
	testwait.ForNil(t, linger/2, "the sender to stop", func() error {
		if sending() {
			return fmt.Errorf("still sending")
		}
		return nil
	})
	time.Sleep(time.Until(answered.Add(linger * 6 / 10))) // the moment under test: inside the linger
	if d := beat(); d > linger*9/10 {
		t.Fatalf("a heartbeat 0.6 linger after the last call was answered after %v: it lingered anew", d)
	}
	if d := time.Since(answered); d < linger*9/10 {
		t.Fatalf("the next call went %v after the last, less than the linger (%v)", d, linger)
	}
	if calls := b.mux.hbServed.Load(); calls != 2 {
		t.Fatalf("%d calls, want 2", calls)
	}
}

// While calls to a peer fail, heartbeats to it do not linger: raft learns
// from a heartbeat that a follower answers again (and resumes replicating
// to it), so a restarted node is heard at once. Once it answers, they
// linger again.
func TestFailingPeerHeardAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 1, nil, nil)
	a := h.nodes[0]
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nobody listens there yet
	ta, err := a.mux.Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ta.Close() })
	const linger = 2 * time.Second
	ta.SetHeartbeatLinger(linger)
	beat := func() (time.Duration, error) {
		start := time.Now()
		var resp raft.AppendEntriesResponse
		err := ta.AppendEntries("b", raft.ServerAddress(addr), heartbeatOf(ta, 4), &resp)
		if err == nil && (resp.Term != 4 || !resp.Success) {
			t.Fatalf("heartbeat answered %+v", resp)
		}
		return time.Since(start), err
	}
	if _, err := beat(); err == nil {
		t.Fatal("a heartbeat to nobody succeeded")
	}

	// The peer comes up.
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(rpc.ServerOptions()...)
	mux := NewMux(addr, rpc.NewPool(), slog.New(slog.DiscardHandler))
	mux.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	tb, err := mux.Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	tb.SetHeartbeatHandler(func(rpc raft.RPC) { acceptHeartbeat(0, rpc) })
	// gRPC may still be backing off its reconnection (at most 2 s).
	deadline := time.Now().Add(10 * time.Second)
	for {
		took, err := beat()
		if err == nil {
			if took >= linger/2 {
				t.Fatalf("the first heartbeat answered after the peer came back took %v (linger %v)", took, linger)
			}
			break
		}
		if took >= linger/2 {
			t.Fatalf("a heartbeat to a failing peer took %v (linger %v): %v", took, linger, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the peer never answered: %v", err)
		}
	}
	if took, err := beat(); err != nil || took < linger/2 {
		t.Fatalf("a heartbeat to an answering peer took %v (linger %v): %v", took, linger, err)
	}
}

// A group about to shut down stops lingering: its heartbeat waiting for a
// long linger is answered at once, by the follower, and so are later ones.
func TestStopLingering(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2, nil, nil)
	b := h.nodes[1]
	as, bs := groupPairs(t, h, 1, func(i int, rpc raft.RPC) {
		req := rpc.Command.(*raft.AppendEntriesRequest)
		rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: 42, Success: true}, nil)
	})
	ta, tb := as[0], bs[0]
	const long = time.Hour
	ta.SetHeartbeatLinger(long)
	type result struct {
		resp raft.AppendEntriesResponse
		err  error
	}
	send := func() <-chan result {
		out := make(chan result, 1)
		go func() {
			var r result
			r.err = ta.AppendEntries(b.id, raft.ServerAddress(b.addr), heartbeatOf(ta, 3), &r.resp)
			out <- r
		}()
		return out
	}
	check := func(what string, ch <-chan result) {
		t.Helper()
		select {
		case r := <-ch:
			if r.err != nil || r.resp.LastLog != 42 || r.resp.Term != 3 {
				t.Fatalf("%s heartbeat: %+v, %v", what, r.resp, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s heartbeat still lingering", what)
		}
	}
	waiting := send()
	select {
	case r := <-waiting:
		t.Fatalf("heartbeat answered within its linger: %+v, %v", r.resp, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	ta.StopLingering()
	check("waiting", waiting)
	check("later", send())

	// When the peer's member is gone too (both nodes stopping), the
	// answer comes at once: closing a thousand groups must not wait for
	// each to open again on the peer, as a unary call would.
	_ = tb.Close()
	start := time.Now()
	select {
	case r := <-send():
		if status.Code(r.err) != codes.NotFound {
			t.Fatalf("heartbeat to a closed group: %+v, %v", r.resp, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("heartbeat to a closed group unanswered")
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("heartbeat to a closed group took %v", took)
	}
}

// A group that does not answer (raft shutting down drops heartbeats) or
// closes while its heartbeat waits holds up nobody else's; unknown groups
// get NotFound as from the unary call.
func TestHeartbeatsGroupClosing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2, nil, nil)
	b := h.nodes[1]
	const n = 20
	var dropped sync.WaitGroup
	dropped.Add(1)
	as, bs := groupPairs(t, h, n, func(i int, rpc raft.RPC) {
		switch i {
		case 3:
			return // never answered
		case 4:
			dropped.Done()
			return // never answered; its transport is closed below
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 9, LastLog: uint64(i), Success: true}, nil)
	})
	type result struct {
		i   int
		err error
		d   time.Duration
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			start := time.Now()
			var resp raft.AppendEntriesResponse
			err := as[i].AppendEntries(b.id, raft.ServerAddress(b.addr), heartbeatOf(as[i], 9), &resp)
			if err == nil && resp.LastLog != uint64(i) {
				err = fmt.Errorf("group %d got %+v", i, resp)
			}
			results <- result{i, err, time.Since(start)}
		}()
	}
	dropped.Wait()
	_ = bs[4].Close()
	for range n {
		r := <-results
		switch r.i {
		case 3, 4:
			if status.Code(r.err) != codes.Unavailable {
				t.Errorf("group %d: %v, want Unavailable", r.i, r.err)
			}
		default:
			if r.err != nil {
				t.Errorf("group %d: %v", r.i, r.err)
			}
		}
		if r.d > 5*time.Second {
			t.Errorf("group %d waited %v", r.i, r.d)
		}
	}

	// Closed on b: NotFound. Closed on a while waiting: ErrTransportShutdown.
	err := as[4].AppendEntries(b.id, raft.ServerAddress(b.addr), heartbeatOf(as[4], 9), new(raft.AppendEntriesResponse))
	if status.Code(err) != codes.NotFound {
		t.Errorf("heartbeat to a closed group: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		done <- as[3].AppendEntries(b.id, raft.ServerAddress(b.addr), heartbeatOf(as[3], 9), new(raft.AppendEntriesResponse))
	}()
	time.Sleep(10 * time.Millisecond) // let it go out (not required for the outcome)
	_ = as[3].Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a closed sender's heartbeat succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Error("closing the sender did not end its heartbeat")
	}
}

// Heartbeats to a node that is down fail promptly, and flow again once it
// is back.
func TestHeartbeatsPeerDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2, nil, nil)
	b := h.nodes[1]
	as, _ := groupPairs(t, h, 10, func(i int, rpc raft.RPC) {
		rpc.Respond(&raft.AppendEntriesResponse{Term: 2, LastLog: uint64(i), Success: true}, nil)
	})
	beat := func(i int) error {
		var resp raft.AppendEntriesResponse
		err := as[i].AppendEntries(b.id, raft.ServerAddress(b.addr), heartbeatOf(as[i], 2), &resp)
		if err == nil && resp.LastLog != uint64(i) {
			err = fmt.Errorf("group %d got %+v", i, resp)
		}
		return err
	}
	if err := beat(1); err != nil {
		t.Fatal(err)
	}
	h.stop(b)
	var wg sync.WaitGroup
	for i := range as {
		wg.Go(func() {
			start := time.Now()
			if err := beat(i); err == nil {
				t.Errorf("group %d: heartbeat to a stopped node succeeded", i)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("group %d: failing took %v", i, d)
			}
		})
	}
	wg.Wait()

	h.restart(b)
	for i := range as {
		tb, err := b.mux.Transport(fmt.Sprintf("g%03d", i))
		if err != nil {
			t.Fatal(err)
		}
		tb.SetHeartbeatHandler(func(rpc raft.RPC) {
			rpc.Respond(&raft.AppendEntriesResponse{Term: 2, LastLog: uint64(i), Success: true}, nil)
		})
	}
	testwait.ForNil(t, 10*time.Second, "heartbeats after the restart", func() error { return beat(7) })
}

// Raft groups over batched heartbeats elect, replicate and keep their
// leaders while idle.
func TestHeartbeatsKeepLeaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3, groupNames(30), func(c *raft.Config) {
		// 90 rafts on a small, shared machine under -race: calmer.
		c.HeartbeatTimeout = time.Second
		c.ElectionTimeout = time.Second
		c.LeaderLeaseTimeout = 500 * time.Millisecond
	})
	leaders := map[string]raft.ServerID{}
	for _, g := range h.groups {
		leaders[g] = h.leader(g).id
		h.apply(g, 1, 10)
	}
	time.Sleep(3 * time.Second) // several heartbeat timeouts, idle
	for _, g := range h.groups {
		if nd := h.leader(g); nd.id != leaders[g] {
			t.Errorf("group %s: leader moved from %s to %s while idle", g, leaders[g], nd.id)
		}
	}
	for _, nd := range h.nodes[1:] { // the groups are bootstrapped on n0, which leads them
		if nd.mux.hbServed.Load() == 0 {
			t.Errorf("%s served no heartbeat batch", nd.id)
		}
	}
}
