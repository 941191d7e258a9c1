package forward

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/proto/queuepb"
)

// leaderFinder knows where a router's group is led from, and runs calls
// there: this node's member when it leads, else the leader's node over
// gRPC, asking the members which node that is when neither this node's
// member nor an earlier answer says. It owns the group's membership as
// this node knows it (members.go) and the leader a non-member learned.
type leaderFinder struct {
	r *Router // its config, log and lifetime (sleep)

	mu     sync.Mutex
	leader string // the leader node as last learned (non-members)

	// members and localMember start as RouterConfig's Members and Local;
	// set replaces them when the group gains or loses a member
	// (members.go). Read them through names, member and local.
	members     atomic.Pointer[[]string]
	localMember atomic.Pointer[localBox]
}

func (f *leaderFinder) init(r *Router, members []string, local Local, leader string) {
	f.r = r
	f.set(members, local)
	f.leader = leader
}

// target is where the leader is: this node's member or a node address.
type target struct {
	local bool
	addr  string
}

// resolve finds the leader, waiting with backoff until ctx is done, or
// returns at once why the group is gone (RouterConfig.Gone).
func (f *leaderFinder) resolve(ctx context.Context) (target, error) {
	r := f.r
	backoff := minBackoff
	for {
		if r.cfg.Gone != nil {
			if err := r.cfg.Gone(); err != nil {
				return target{}, err
			}
		}
		t, err := f.tryResolve(ctx)
		if err == nil {
			return t, nil
		}
		r.log.Debug("forward: no leader yet", "err", err)
		if werr := r.sleep(ctx, backoff); werr != nil {
			return target{}, fmt.Errorf("forward: queue %s: %w (%v)", r.cfg.Name, werr, err)
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (f *leaderFinder) tryResolve(ctx context.Context) (target, error) {
	if f.member() == nil && f.r.cfg.Wake != nil && f.r.ctx.Err() == nil {
		// A hibernated member opens; a non-member's is a no-op. Not
		// once the router is closed: settlements still passed on then
		// (passedon.go) must not open a member again.
		f.r.cfg.Wake()
	}
	if l := f.member(); l != nil {
		if l.IsLeader() {
			return target{local: true}, nil
		}
		if name := l.Leader(); name != "" {
			return f.remote(name)
		}
		// A member that knows no leader may just have joined the group
		// (its replica opened after the others'): the leader, having
		// failed to reach it before, backs off for seconds before trying
		// again. Ask the other members rather than wait for it.
	} else if name := f.learnt(); name != "" {
		return f.remote(name)
	}
	leader, _, err := f.askLeader(ctx, false)
	if leader == "" {
		return target{}, errors.Join(err, errNoLeader)
	}
	return f.remote(leader)
}

// learnt is the leader a non-member last learned, "" if none.
func (f *leaderFinder) learnt() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

// askLeader asks the members in turn which node leads, until one names
// it (and it is remembered), or with peek until one says the group
// hibernates; err gathers why the others did not answer.
func (f *leaderFinder) askLeader(ctx context.Context, peek bool) (leader string, asleep bool, err error) {
	var errs []error
	for _, m := range f.names() {
		addr, ok := f.r.cfg.Addr(m)
		if !ok {
			continue
		}
		c, err := f.client(addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		rep, err := c.Leader(cctx, &queuepb.LeaderRequest{QueueId: f.r.cfg.QueueID, Peek: peek})
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m, err))
			continue
		}
		if rep.Leader != "" {
			f.mu.Lock()
			f.leader = rep.Leader
			f.mu.Unlock()
			return rep.Leader, false, nil
		}
		if rep.Asleep {
			return "", true, nil
		}
	}
	return "", false, errors.Join(errs...)
}

func (f *leaderFinder) remote(node string) (target, error) {
	addr, ok := f.r.cfg.Addr(node)
	if !ok {
		f.forget(failure{})
		return target{}, fmt.Errorf("forward: no address for node %q", node)
	}
	return target{addr: addr}, nil
}

// forget drops the cached leader after a "not leader" or unavailable
// answer, keeping the answering member's hint.
func (f *leaderFinder) forget(fl failure) {
	f.mu.Lock()
	f.leader = fl.leader
	f.mu.Unlock()
}

func (f *leaderFinder) client(addr string) (queuepb.ForwardClient, error) {
	conn, err := f.r.cfg.Pool.Conn(addr)
	if err != nil {
		return nil, err
	}
	return queuepb.NewForwardClient(conn), nil
}

// onLeader runs local when this node's member leads, else remote with the
// leader's client, resolving the leader again after "not leader" and
// unavailable answers, until ctx is done.
func (f *leaderFinder) onLeader(ctx context.Context, local func(Local) error, remote func(context.Context, queuepb.ForwardClient, string) error) error {
	r := f.r
	backoff := minBackoff
	for {
		t, err := f.resolve(ctx)
		if err != nil {
			return err
		}
		var fl failure
		if t.local {
			err := local(f.local())
			if !isNotLeader(err) {
				return err
			}
			fl = failure{err: err, retry: true}
		} else {
			c, err := f.client(t.addr)
			if err != nil {
				return err
			}
			fl = fromStatus(remote(ctx, c, t.addr))
			if fl.err == nil {
				return nil
			}
			if !fl.retry {
				return fl.err
			}
			f.forget(fl)
		}
		r.log.Debug("forward: leader moved, retrying", "err", fl.err)
		if werr := r.sleep(ctx, backoff); werr != nil {
			return fmt.Errorf("forward: queue %s: %w", r.cfg.Name, fl.err)
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// known is the group's leader as this node knows it without asking
// anyone: its member's view, or the leader a non-member last learned, or
// else RouterConfig.Leader ("" if none).
func (f *leaderFinder) known() string {
	if l := f.member(); l != nil {
		return l.Leader()
	}
	if name := f.learnt(); name != "" {
		return name
	}
	return f.r.cfg.Leader
}

// asleep reports, without waking it, whether the group hibernates: this
// node's member is closed, or for a non-member that knows no leader, a
// member asked with a peek says so.
func (f *leaderFinder) asleep() bool {
	if f.member() != nil {
		return false
	}
	if f.r.cfg.Asleep != nil && f.r.cfg.Asleep() {
		return true
	}
	if f.learnt() != "" {
		return false // its Stats answer for a hibernated group without waking it
	}
	ctx, cancel := context.WithTimeout(f.r.ctx, statsTimeout)
	defer cancel()
	_, asleep, _ := f.askLeader(ctx, true)
	return asleep
}
