package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/warrenmq/warren/proto/raftpb"
)

// Transport is the raft.Transport of one Raft group: its outgoing calls
// name the group and share the Mux's peer connections, and the Mux routes
// incoming requests for the group to Consumer.
type Transport struct {
	mux   *Mux
	group string
	// in hands peers' requests to raft (inbox.go).
	in inbox

	// hbLinger is how long this group's heartbeats wait for others to
	// share their call (SetHeartbeatLinger); read by the peer's sender.
	hbLinger atomic.Int64
	// hurry is closed by StopLingering: heartbeats go at once.
	hurry     chan struct{}
	hurryOnce sync.Once
	// stopWaiting is canceled by StopLingering (and Close): calls waiting
	// for a peer (awaitPeer) give up.
	stopWaiting       context.Context
	cancelStopWaiting context.CancelFunc
	// judge is JudgeVotesOf's raft, or nil (votes.go).
	judge atomic.Pointer[raft.Raft]
	// What the group learns of its followers as it replicates to them:
	// acks their acknowledgements (acks.go), behind those a replication
	// call failed to reach (catchup.go), spares the followers its
	// commits do without (spare.go).
	acks   ackTracker
	behind catchUp
	spares spareChooser
	// peerWait is how long an AppendEntries waits for a peer whose
	// connection is down (SetPeerWait); 0: not at all.
	peerWait atomic.Int64

	// ctx is the parent of every outgoing call and is done once the
	// transport is closed; server handlers waiting on the group give up
	// on it too.
	ctx    context.Context
	cancel context.CancelFunc
}

var (
	_ raft.Transport   = (*Transport)(nil)
	_ raft.WithClose   = (*Transport)(nil)
	_ raft.WithPreVote = (*Transport)(nil)
)

func newTransport(m *Mux, group string) *Transport {
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{mux: m, group: group, hurry: make(chan struct{}), ctx: ctx, cancel: cancel}
	t.in.init(group, m.local, ctx)
	t.spares = spareChooser{group: group, self: raft.ServerAddress(m.local), judge: &t.judge}
	t.stopWaiting, t.cancelStopWaiting = context.WithCancel(ctx)
	t.hbLinger.Store(int64(defaultHeartbeatLinger))
	return t
}

// SetHeartbeatLinger sets how long a heartbeat of this group that finds
// its peer's sender idle waits for others to join its call (by default
// defaultHeartbeatLinger). Longer means fewer calls, and fewer heartbeats:
// raft's heartbeat goroutine sends the next one a tenth to a fifth of the
// heartbeat timeout after the answer to the last. The longest gap between
// two answers, that interval plus the linger, must stay well inside the
// group's leader lease and its heartbeat timeout.
func (t *Transport) SetHeartbeatLinger(d time.Duration) { t.hbLinger.Store(int64(d)) }

// StopLingering makes this group's heartbeats go out at once from now on,
// those already waiting for their batch included, and its calls waiting
// for a peer to come back (SetPeerWait) give up. raft.Shutdown waits for
// the group's heartbeat and replication goroutines, so a group about to
// shut down calls it first: a linger of seconds would hold up closing
// the group by as much, a thousand times over when a node with a thousand
// queues stops.
func (t *Transport) StopLingering() {
	t.hurryOnce.Do(func() { close(t.hurry) })
	t.cancelStopWaiting()
}

// SetPeerWait makes this group's AppendEntries calls to a peer whose
// connection is down wait up to d for it to come back before failing.
//
// hashicorp/raft's leader backs off after each failed AppendEntries to a
// follower, doubling up to about ten seconds, and counts the failures
// until one succeeds; it cannot be woken from that sleep. Failing fast
// while a node is down for a restart (a refused connection takes
// microseconds) reaches the ten seconds within twenty, so the restarted
// node's replicas learned nothing for up to ten seconds more, and a
// leadership transfer to one of them (a rebalance) waited as long. A
// call that waits for the connection instead fails once per d of
// downtime, and goes out as soon as the peer is back.
func (t *Transport) SetPeerWait(d time.Duration) { t.peerWait.Store(int64(d)) }

// SetPipelineIdle sets fn to be called, on a goroutine of its own, when a
// replication pipeline of this group has gone idle with the follower's
// acknowledged log ending at lastAcked (pipeline.go's checkIdle): if the
// leader's log goes further, the group should append an entry, which
// makes raft send the next batch. It is also called, with lastAcked 0,
// when a follower that a replication call failed to reach answers a
// heartbeat again (catchup.go).
func (t *Transport) SetPipelineIdle(fn func(lastAcked uint64)) { t.behind.nudge.Store(&fn) }

// failReplication is fail for a replication call (entries or a snapshot),
// which also notes target as behind (catchup.go).
func (t *Transport) failReplication(method string, target raft.ServerAddress, err error) error {
	t.behind.failed(target)
	return t.fail(method, target, err)
}

// Group is the name of the Raft group this transport carries.
func (t *Transport) Group() string { return t.group }

// Consumer implements raft.Transport.
func (t *Transport) Consumer() <-chan raft.RPC { return t.in.ch }

// LocalAddr implements raft.Transport: the node's internal address.
func (t *Transport) LocalAddr() raft.ServerAddress { return raft.ServerAddress(t.mux.local) }

// SetHeartbeatHandler implements raft.Transport: heartbeats are handed to
// cb on the serving goroutine instead of waiting on Consumer behind the
// group's log traffic.
func (t *Transport) SetHeartbeatHandler(cb func(rpc raft.RPC)) { t.in.setHeartbeatHandler(cb) }

// EncodePeer implements raft.Transport: the address bytes.
func (t *Transport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte { return []byte(addr) }

// DecodePeer implements raft.Transport.
func (t *Transport) DecodePeer(buf []byte) raft.ServerAddress { return raft.ServerAddress(buf) }

// Close implements raft.WithClose: it unregisters the group, so later
// requests for it fail with codes.NotFound, and cancels the group's
// calls and pipelines in flight. It may be called more than once.
func (t *Transport) Close() error {
	t.cancel()
	t.mux.unregister(t)
	t.in.close()
	return nil
}

// AppendEntries implements raft.Transport. Heartbeats go in the next
// batch to target (heartbeat.go).
func (t *Transport) AppendEntries(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if isHeartbeat(args) {
		return t.heartbeat(target, args, resp)
	}
	c, ctx, cancel, err := t.call(target, true)
	if err != nil {
		return t.failReplication("AppendEntries", target, err)
	}
	defer cancel()
	out, err := c.AppendEntries(ctx, appendReqToPB(t.group, args))
	if err != nil {
		return t.failReplication("AppendEntries", target, err)
	}
	if err := appendRespFromPB(out, resp); err != nil {
		return err
	}
	t.acks.record(target, args, resp)
	return nil
}

// RequestVote implements raft.Transport.
func (t *Transport) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	c, ctx, cancel, err := t.call(target, false)
	if err != nil {
		return t.fail("RequestVote", target, err)
	}
	defer cancel()
	out, err := c.RequestVote(ctx, voteReqToPB(t.group, args))
	if err != nil {
		return t.fail("RequestVote", target, err)
	}
	return voteRespFromPB(out, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (t *Transport) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	c, ctx, cancel, err := t.call(target, false)
	if err != nil {
		return t.fail("RequestPreVote", target, err)
	}
	defer cancel()
	out, err := c.RequestPreVote(ctx, preVoteReqToPB(t.group, args))
	if err != nil {
		return t.fail("RequestPreVote", target, err)
	}
	return preVoteRespFromPB(out, resp)
}

// TimeoutNow implements raft.Transport.
func (t *Transport) TimeoutNow(_ raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	c, ctx, cancel, err := t.call(target, false)
	if err != nil {
		return t.fail("TimeoutNow", target, err)
	}
	defer cancel()
	out, err := c.TimeoutNow(ctx, &raftpb.TimeoutNowRequest{Group: t.group, Header: headerToPB(args.RPCHeader)})
	if err != nil {
		return t.fail("TimeoutNow", target, err)
	}
	*resp = raft.TimeoutNowResponse{RPCHeader: headerFromPB(out.Header)}
	return errFromString(out.Error)
}

// call returns a client on the ordinary connection to target and a
// context bounded by rpcTimeout and the transport's life. With waitPeer
// it first waits for a connection that is down (awaitPeer), before the
// timeout starts.
func (t *Transport) call(target raft.ServerAddress, waitPeer bool) (raftpb.RaftClient, context.Context, context.CancelFunc, error) {
	if t.ctx.Err() != nil {
		return nil, nil, nil, raft.ErrTransportShutdown
	}
	cc, err := t.mux.pool.Conn(string(target))
	if err != nil {
		return nil, nil, nil, err
	}
	if waitPeer {
		t.awaitPeer(cc, target)
	}
	ctx, cancel := context.WithTimeout(t.ctx, rpcTimeout)
	return raftpb.NewRaftClient(cc), ctx, cancel, nil
}

// awaitPeer waits, up to the peer wait, until cc (the connection to
// target) is ready; it returns at once when it is, when no wait is set,
// and when the group stops (StopLingering or Close). The call that
// follows fails as before if the peer is still down.
func (t *Transport) awaitPeer(cc *grpc.ClientConn, target raft.ServerAddress) {
	d := time.Duration(t.peerWait.Load())
	if d <= 0 {
		return
	}
	st := cc.GetState()
	if st == connectivity.Ready {
		return
	}
	ctx, cancel := context.WithTimeout(t.stopWaiting, d)
	defer cancel()
	for st != connectivity.Ready {
		if st == connectivity.Idle {
			cc.Connect()
		}
		if !cc.WaitForStateChange(ctx, st) {
			t.mux.log.Debug("raft peer still unreachable after waiting", "group", t.group, "target", string(target), "state", st.String())
			return
		}
		st = cc.GetState()
	}
}

// fail logs a failed call at Debug (a dead peer must not flood the log;
// raft itself reports what matters) and wraps it with its context.
func (t *Transport) fail(method string, target raft.ServerAddress, err error) error {
	if t.ctx.Err() != nil && !errors.Is(err, raft.ErrTransportShutdown) {
		err = fmt.Errorf("%w: %w", raft.ErrTransportShutdown, err)
	}
	t.mux.log.Debug("raft rpc failed", "group", t.group, "method", method, "target", string(target), "error", err)
	return fmt.Errorf("transport: group %s: %s to %s: %w", t.group, method, target, err)
}

// appendFuture is a pipelined AppendEntries call (raft.AppendFuture).
type appendFuture struct {
	start time.Time
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	err   error
	done  chan struct{}
}

func (f *appendFuture) Error() error {
	<-f.done
	return f.err
}

func (f *appendFuture) Start() time.Time                      { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest   { return f.args }
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// Campaign makes this node's member of the group start an election at
// once, as a TimeoutNow from the group's leader does in a leadership
// transfer (raft has no API for it). It is meant for a group just
// bootstrapped here, which has no leader to disturb: with long heartbeat
// timeouts its first election would otherwise wait one.
func (t *Transport) Campaign(ctx context.Context) error {
	return t.in.toSelf(ctx, &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: []byte(t.mux.local)}})
}

// RaiseTerm makes this node's member of the group, id in its
// configuration, adopt term if it is behind it, as a vote request of that
// term does: a follower or candidate becomes a follower at term. The
// request asks for a vote on an empty log, which a member with any entry
// refuses, so it votes for nobody (one with none votes for itself); a
// member that knows a leader ignores it. raft has no API for it; the
// replica uses it before a campaign whose term the voters may have voted
// in already (raftq/replica's failover.go).
func (t *Transport) RaiseTerm(ctx context.Context, id string, term uint64) error {
	return t.in.toSelf(ctx, &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(t.mux.local)},
		Term:      term,
	})
}
