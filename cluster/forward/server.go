package forward

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq/linger"
	"github.com/warrenmq/warren/raftq/queue"
)

// Server serves the queues whose member on this node leads.
type Server struct {
	queuepb.UnimplementedForwardServer
	lookup func(queueID string) (Local, bool)
	// asleep reports whether this node's member of a queue is closed
	// while its group is idle (SetAsleep); lookup opens it again.
	asleep atomic.Pointer[func(queueID string) bool]
	// replies takes direct reply-to replies for this node's requesters
	// (SetReplies, reply.go).
	replies atomic.Pointer[Replies]
	log     *slog.Logger

	// alive reports whether gossip sees a node alive (SetNodeAlive), and
	// startGone whether a consumer's node start is over (SetStartGone).
	alive     atomic.Pointer[func(node string) bool]
	startGone atomic.Pointer[func(consumer uint64) bool]
	// deliveryLinger is how long a consume stream may hold deliveries
	// for company (SetDeliveryLinger); 0 sends each at once.
	deliveryLinger atomic.Int64

	mu   sync.Mutex
	held map[string]*heldSet
	// suspended are the consumers whose streams broke, with the timers
	// that return what they still hold (disconnected.go).
	suspended map[*serverConsumer]*time.Timer
	closed    bool
}

// NewServer returns a Server that finds a queue's member with lookup.
func NewServer(lookup func(queueID string) (Local, bool), log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{lookup: lookup, log: log, held: make(map[string]*heldSet), suspended: make(map[*serverConsumer]*time.Timer)}
}

// SetDeliveryLinger lets a consume stream hold a delivery that follows
// another within d for up to d, so that the deliveries of that moment go
// to the consumer's node in one message (raftq/linger says when): at
// 1,000 msg/s each went alone, with a gRPC message, a write and a wake-up
// on each side. 0 sends each at once. Streams started later use it.
func (s *Server) SetDeliveryLinger(d time.Duration) { s.deliveryLinger.Store(int64(d)) }

// SetAsleep gives the server the node's view of hibernated groups: a
// count (Stats) or a peeking Leader question about such a group is
// answered without waking it, while every other call finds the member
// through lookup, which wakes it.
func (s *Server) SetAsleep(fn func(queueID string) bool) { s.asleep.Store(&fn) }

func (s *Server) isAsleep(queueID string) bool {
	fn := s.asleep.Load()
	return fn != nil && (*fn)(queueID)
}

// Register adds the Forward service to g.
func (s *Server) Register(g *grpc.Server) { queuepb.RegisterForwardServer(g, s) }

// member finds the queue's member on this node; leading also requires
// that it leads.
func (s *Server) member(queueID string, leading bool) (Local, error) {
	l, ok := s.lookup(queueID)
	if !ok || l == nil {
		return nil, toStatus(errNoQueue, "")
	}
	if leading && !l.IsLeader() {
		return nil, toStatus(errNotLeader, l.Leader())
	}
	return l, nil
}

// heldSet is the delivery IDs of one queue that consume streams handed
// out and that are not settled yet, with the stream that carried them:
// when a stream breaks (the router's node is gone or cut off), its
// deliveries go back to the queue, after the disconnected timeout unless
// the consumer attaches again (disconnected.go). Settlements through any
// stream or Settle remove them.
type heldSet struct {
	mu sync.Mutex
	by map[uint64]*serverConsumer
}

func (s *Server) heldFor(queueID string) *heldSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[queueID]
	if h == nil {
		h = &heldSet{by: make(map[uint64]*serverConsumer)}
		s.held[queueID] = h
	}
	return h
}

func (h *heldSet) remove(ids []uint64) {
	h.mu.Lock()
	for _, id := range ids {
		delete(h.by, id)
	}
	h.mu.Unlock()
}

// countFor counts the deliveries sc answers for.
func (h *heldSet) countFor(sc *serverConsumer) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.by {
		if c == sc {
			n++
		}
	}
	return n
}

// takeFor removes and returns the IDs sc holds, in the order they were
// handed out, which is the order they go back to the queue in.
func (h *heldSet) takeFor(sc *serverConsumer) []uint64 {
	h.mu.Lock()
	var ids []uint64
	for id, c := range h.by {
		if c == sc {
			ids = append(ids, id)
			delete(h.by, id)
		}
	}
	h.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// Leader names the leader this node's member knows.
func (s *Server) Leader(_ context.Context, req *queuepb.LeaderRequest) (*queuepb.LeaderReply, error) {
	if req.Peek && s.isAsleep(req.QueueId) {
		return &queuepb.LeaderReply{Asleep: true}, nil
	}
	l, err := s.member(req.QueueId, false)
	if err != nil {
		return nil, err
	}
	return &queuepb.LeaderReply{Leader: l.Leader()}, nil
}

// Get serves basic.get.
func (s *Server) Get(_ context.Context, req *queuepb.GetRequest) (*queuepb.GetReply, error) {
	l, err := s.member(req.QueueId, true)
	if err != nil {
		return nil, err
	}
	var d queue.Delivery
	var remaining uint32
	var ok bool
	if req.Getter != 0 {
		d, remaining, ok, err = l.GetAs(req.Getter, req.NoAck)
	} else {
		d, remaining, ok, err = l.Get(req.NoAck)
	}
	if err != nil {
		return nil, toStatus(err, l.Leader())
	}
	if !ok {
		return &queuepb.GetReply{}, nil
	}
	pd, err := encodeDelivery(d)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &queuepb.GetReply{Ok: true, Remaining: remaining, Delivery: pd, Owned: req.Getter != 0}, nil
}

// Purge serves queue.purge.
func (s *Server) Purge(_ context.Context, req *queuepb.PurgeRequest) (*queuepb.PurgeReply, error) {
	l, err := s.member(req.QueueId, true)
	if err != nil {
		return nil, err
	}
	n, err := l.Purge()
	if err != nil {
		return nil, toStatus(err, l.Leader())
	}
	return &queuepb.PurgeReply{Count: n}, nil
}

// Stats answers with the leader's counts.
func (s *Server) Stats(_ context.Context, req *queuepb.StatsRequest) (*queuepb.StatsReply, error) {
	if s.isAsleep(req.QueueId) {
		return &queuepb.StatsReply{}, nil // a hibernated queue is empty and unused
	}
	l, err := s.member(req.QueueId, true)
	if err != nil {
		return nil, err
	}
	st := l.Stats()
	return &queuepb.StatsReply{Ready: st.Ready, Unacked: st.Unacked, Consumers: st.Consumers, DeadLettered: st.DeadLettered, Delayed: st.Delayed}, nil
}

// Reconfigure hands the leading member the queue's new effective
// x-arguments.
func (s *Server) Reconfigure(_ context.Context, req *queuepb.ReconfigureRequest) (*queuepb.ReconfigureReply, error) {
	l, err := s.member(req.QueueId, true)
	if err != nil {
		return nil, err
	}
	args, _, err := wire.DecodeTable(req.Arguments)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := l.Reconfigure(args); err != nil {
		return nil, toStatus(err, l.Leader())
	}
	return &queuepb.ReconfigureReply{}, nil
}

// Settle applies settlements of deliveries to this node's member, whether
// or not it still leads (a member that no longer leads passes on those it
// knows to the leader, replica/former.go), and, on the leader, the held
// settlements such a member passed on.
func (s *Server) Settle(_ context.Context, req *queuepb.SettleRequest) (*queuepb.SettleReply, error) {
	l, err := s.member(req.QueueId, len(req.Held) > 0 || len(req.Owned) > 0)
	if err != nil {
		return nil, err
	}
	if len(req.Owned) > 0 {
		if err := l.SettleOwned(decodeOwned(req.Owned)); err != nil {
			return nil, toStatus(err, l.Leader())
		}
	}
	if len(req.Held) > 0 {
		if err := l.SettleHeld(decodeHeld(req.Held)); err != nil {
			return nil, toStatus(err, l.Leader())
		}
	}
	h := s.heldFor(req.QueueId)
	// A member that does not lead settles what it knows as a former
	// leader (passing it on by consumer and message) and refuses the
	// rest, which the sender then sends to the leader: passing those on
	// itself could send them back and forth between two members that each
	// think the other leads.
	refused := false
	for _, st := range req.Settlements {
		if !l.IsLeader() && !l.Knows(st.Ids) {
			refused = true
			continue
		}
		h.remove(st.Ids)
		settleOn(l, st)
	}
	if refused {
		return nil, toStatus(errNotLeader, l.Leader())
	}
	return &queuepb.SettleReply{}, nil
}

// pubResults collects a publish stream's answers for its sender.
type pubResults struct {
	mu        sync.Mutex
	reply     *queuepb.PublishReply
	notLeader bool
	wake      chan struct{}
}

func (p *pubResults) done(seq uint64) func(error) {
	return func(err error) {
		p.mu.Lock()
		if p.reply == nil {
			p.reply = &queuepb.PublishReply{}
		}
		r := p.reply
		switch {
		case err == nil:
			r.Confirmed = append(r.Confirmed, seq)
		case errors.Is(err, queue.ErrRejected):
			r.Rejected = append(r.Rejected, seq)
		case errors.Is(err, queue.ErrDeleted):
			r.Deleted = append(r.Deleted, seq)
		case isOutOfSequence(err):
			r.OutOfSequence = append(r.OutOfSequence, seq)
		case isNotLeader(err), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			// The router sends it again, to whichever member leads.
			p.notLeader = true
		default:
			r.Rejected = append(r.Rejected, seq)
		}
		p.mu.Unlock()
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

func (p *pubResults) take() (*queuepb.PublishReply, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.reply
	p.reply = nil
	return r, p.notLeader
}

// Publish stores a router's publishes through the leading member, in the
// order they arrive, and answers each once committed. The stream ends with
// NOT_LEADER when the member stops leading; the router then sends every
// unanswered publish again.
func (s *Server) Publish(stream queuepb.Forward_PublishServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	if req.Publisher == 0 {
		return status.Error(codes.InvalidArgument, "publish stream without a publisher")
	}
	l, err := s.member(req.QueueId, true)
	if err != nil {
		return err
	}
	ctx := stream.Context()
	res := &pubResults{wake: make(chan struct{}, 1)}
	recvErr := make(chan error, 1)
	go func() {
		publisher := req.Publisher
		for {
			for _, p := range req.Publishes {
				done := res.done(p.Seq)
				m, err := decodeMessage(p.Message)
				if err != nil {
					done(err)
					continue
				}
				if err := l.EnqueueAs(ctx, m, publisher, p.Seq, done); err != nil && ctx.Err() != nil {
					recvErr <- ctx.Err()
					return
				}
			}
			var err error
			if req, err = stream.Recv(); err != nil {
				recvErr <- err
				return
			}
		}
	}()
	for {
		select {
		case <-res.wake:
		case err := <-recvErr:
			if err == io.EOF {
				return nil
			}
			return err
		}
		reply, notLeader := res.take()
		if reply != nil {
			if err := stream.Send(reply); err != nil {
				return err
			}
		}
		if notLeader {
			return toStatus(errNotLeader, l.Leader())
		}
	}
}

// serverConsumer is the queue.Consumer a Consume stream attaches to the
// leading member: deliveries wait in buf for the stream's sender.
type serverConsumer struct {
	queueID string
	id      uint64 // its consumer ID (0 for a no-ack consumer)
	kept    bool   // still in its place after its stream broke (Local.Disconnect)
	held    *heldSet
	wake    chan struct{}
	origin  string // the consuming channel's node (Attach.Origin)

	mu      sync.Mutex
	buf     []queue.Delivery
	linger  linger.Policy // of buf's deliveries
	paused  bool
	end     consumerEnd
	timeout time.Duration
}

type consumerEnd uint8

const (
	endNone consumerEnd = iota
	endCancelled
	endGone
	endTimedOut
	endLeaderLost
)

// serverBufLimit is the deliveries a stream buffers before it asks the
// member to pause (a member may ignore it: its consumer credit bounds
// deliveries anyway).
const serverBufLimit = 1024

var _ queue.Movable = (*serverConsumer)(nil)

func (sc *serverConsumer) signal() {
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// Deliver implements queue.Consumer; it only buffers.
func (sc *serverConsumer) Deliver(d queue.Delivery) bool {
	if d.ID != 0 {
		sc.held.mu.Lock()
		sc.held.by[d.ID] = sc
		sc.held.mu.Unlock()
	}
	sc.mu.Lock()
	sc.buf = append(sc.buf, d)
	n := len(sc.buf)
	if n >= serverBufLimit {
		sc.paused = true
	}
	full := false
	if sc.linger.Wait() > 0 {
		sc.linger.Arrive(time.Now())
		full = sc.linger.Full()
	}
	sc.mu.Unlock()
	// The first wakes the sender, which sends at once or, while some are
	// held, waits out their linger: only a full batch wakes it again.
	if n == 1 || full || n >= serverBufLimit {
		sc.signal()
	}
	return n < serverBufLimit
}

// take returns the buffered deliveries to send now, or, while some are
// held for company and neither full nor ended, how long they may wait.
func (sc *serverConsumer) take() (buf []queue.Delivery, end consumerEnd, timeout time.Duration, paused bool, wait time.Duration) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	now := time.Now()
	expired := false
	if sc.linger.Held() > 0 && !sc.linger.Full() {
		due := sc.linger.Due()
		if now.Before(due) && !sc.paused && sc.end == endNone {
			return nil, endNone, 0, false, due.Sub(now)
		}
		expired = !now.Before(due)
	}
	sc.linger.Release(expired, now)
	buf, end, timeout, paused = sc.buf, sc.end, sc.timeout, sc.paused
	sc.buf, sc.paused = nil, false
	return buf, end, timeout, paused, 0
}

func (sc *serverConsumer) ended(e consumerEnd, timeout time.Duration) {
	sc.mu.Lock()
	// Gone wins over a LeaderLost not yet acted on: a member being
	// deleted stops leading on its way down.
	if sc.end == endNone || (e == endGone && sc.end == endLeaderLost) {
		sc.end, sc.timeout = e, timeout
	}
	sc.mu.Unlock()
	sc.signal()
}

// Gone implements queue.Consumer: the queue was deleted.
func (sc *serverConsumer) Gone() { sc.ended(endGone, 0) }

// TimedOut implements queue.Consumer.
func (sc *serverConsumer) TimedOut(timeout time.Duration) { sc.ended(endTimedOut, timeout) }

// Origin implements queue.Origin.
func (sc *serverConsumer) Origin() string { return sc.origin }

// LeaderLost implements queue.Movable: the stream ends with NOT_LEADER and
// the router attaches again to the new leader.
func (sc *serverConsumer) LeaderLost() { sc.ended(endLeaderLost, 0) }

// consumeBatch bounds the deliveries of one reply.
const (
	consumeBatch      = 256
	consumeBatchBytes = 1 << 20
)

// Consume attaches one consumer to the leading member and streams its
// deliveries back.
func (s *Server) Consume(stream queuepb.Forward_ConsumeServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	if req.Attach == nil {
		return status.Error(codes.InvalidArgument, "consume stream must start with attach")
	}
	l, err := s.member(req.Attach.QueueId, true)
	if err != nil {
		return err
	}
	opts, err := decodeOptions(req.Attach)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	sc := &serverConsumer{queueID: req.Attach.QueueId, id: opts.ID, held: s.heldFor(req.Attach.QueueId), wake: make(chan struct{}, 1), origin: req.Attach.Origin,
		linger: linger.New(time.Duration(s.deliveryLinger.Load()))}
	if err := l.Consume(sc, opts); err != nil {
		return toStatus(err, l.Leader())
	}
	if opts.ID != 0 {
		// A consumer attaching again after a leader change keeps what an
		// earlier leader handed it: this stream answers for those too.
		if ids := l.Deliveries(opts.ID); len(ids) > 0 {
			sc.held.mu.Lock()
			for _, id := range ids {
				sc.held.by[id] = sc
			}
			sc.held.mu.Unlock()
		}
	}
	clean := false
	defer func() {
		if clean {
			return
		}
		// The router's end of the stream is gone: take the consumer
		// away, and keep what it holds (and an exclusive or single
		// active consumer's place) for it to come back, for a while
		// (disconnected.go).
		sc.kept = l.Disconnect(sc)
		s.disconnected(l, sc)
	}()
	if err := stream.Send(&queuepb.ConsumeReply{Attached: true}); err != nil {
		return err
	}
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			for _, st := range req.Settlements {
				sc.held.remove(st.Ids)
				settleOn(l, st)
			}
			if req.Cancel {
				// Deliveries made until the detach is applied are in
				// buf when Cancel returns, and go out before the end.
				l.Cancel(sc)
				sc.ended(endCancelled, 0)
				return
			}
		}
	}()
	ctx := stream.Context()
	var batch []*queuepb.Delivery
	lingering := time.NewTimer(time.Hour)
	lingering.Stop()
	defer lingering.Stop()
	for {
		select {
		case <-sc.wake:
		case <-lingering.C:
		case err := <-recvErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
		buf, end, timeout, paused, wait := sc.take()
		if wait > 0 {
			lingering.Reset(wait)
			continue
		}
		size := 0
		for i, d := range buf {
			pd, err := encodeDelivery(d)
			if err != nil {
				s.log.Error("forward: encode delivery", "err", err)
				continue
			}
			batch = append(batch, pd)
			size += len(pd.Message.Body)
			if len(batch) == consumeBatch || size >= consumeBatchBytes || i == len(buf)-1 {
				if err := stream.Send(&queuepb.ConsumeReply{Deliveries: batch}); err != nil {
					return err
				}
				clear(batch)
				batch, size = batch[:0], 0
			}
		}
		if paused {
			l.Resume(sc)
		}
		switch end {
		case endCancelled:
			clean = true
			if s.log.Enabled(ctx, slog.LevelDebug) { // countFor reads every held delivery of the queue
				s.log.Debug("forward: consume stream cancelled", "queue", req.Attach.QueueId, "consumer", opts.ID, "origin", sc.origin, "held", sc.held.countFor(sc))
			}
			return nil
		case endGone:
			clean = true
			sc.held.takeFor(sc)
			return stream.Send(&queuepb.ConsumeReply{Gone: true})
		case endTimedOut:
			clean = true
			return stream.Send(&queuepb.ConsumeReply{TimedOut: true, TimeoutMs: timeout.Milliseconds()})
		case endLeaderLost:
			// The member forgot the consumer and takes its messages back.
			clean = true
			sc.held.takeFor(sc)
			return toStatus(errNotLeader, l.Leader())
		}
	}
}
