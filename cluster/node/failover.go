package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/raftq/replica"
)

// defaultQueueTimeout is the queue groups' heartbeat and election
// timeout. A leader heartbeats each follower every tenth to fifth of it,
// and the node's transport holds each heartbeat up to half of it to share
// a call, so with a thousand idle queues heartbeats are what an idle node
// spends its CPU on: on three nodes of a 2-core machine, 0.6 of a core at
// 2 s, 11% at 10 s, 3% at 30 s (the floor: 60 s measured the same).
// A dead leader is not found by this timeout but by gossip (failover.event),
// whose verdict makes a survivor campaign at once: a SIGKILLed leader's
// queues take publishes again after about the gossip's detection time
// (two to three seconds), whatever this is. The timeout is what is left
// for failures gossip does not see (a leader whose node lives but whose
// group is cut off from it: its followers elect after one to two
// timeouts) and how long a leader cut off from its followers keeps the
// role (its lease; it confirms nothing meanwhile, having no majority),
// and how long a leadership transfer whose target fails mid-way holds
// up publishes.
const defaultQueueTimeout = 30 * time.Second

// peerWait is how long a leader's AppendEntries to a node that is down,
// a queue group's or the metadata group's, waits for it to come back
// before counting a failure (the transport's SetPeerWait). raft's backoff reaches its ten seconds after
// twelve failures in a row: a minute each puts that twelve minutes into
// a node's downtime, past most restarts and upgrades, where failing fast
// put it twenty seconds in. Waiting costs nothing but the replication
// goroutine of a follower that is down, which raft keeps anyway.
const peerWait = time.Minute

func (c *clusterNode) queueTimeout() time.Duration {
	if c.cfg.QueueTimeout > 0 {
		return c.cfg.QueueTimeout
	}
	return max(defaultQueueTimeout, c.cfg.HeartbeatTimeout)
}

// failover is how this node reacts to gossip's news of another node's
// failure, departure or restart (event), and its record of the node
// starts gossip reported: boots, the boot last reported for each node,
// and gone, the starts seen restarted or departed since. mu guards both.
type failover struct {
	c     *clusterNode
	mu    sync.Mutex
	boots map[string]string
	gone  goneStarts
}

func newFailover(c *clusterNode) *failover {
	return &failover{c: c, boots: make(map[string]string)}
}

// event reacts to gossip: when a node fails or restarts, this
// node's followers in every group that node led elect a new leader
// promptly instead of after a full queue heartbeat timeout
// (replica.LeaderSuspected, replica.LeaderRestarted). It reports whether
// the event shows the node restarted since gossip last reported it.
func (f *failover) event(ev membership.Event) (restarted bool) {
	if ev.Member.Name == f.c.self {
		return false
	}
	restartedFrom := f.noteBoot(ev)
	defer f.previousGone(ev) // after a restart seen happen is handled
	if ev.Kind == membership.Failed || ev.Kind == membership.Departed || restartedFrom != "" {
		// Its channels are gone, or cut off: what its consumers held
		// goes back to the queues, at once or, for a node that may only
		// be cut off, after the queue's consumer disconnected timeout
		// (forward.Server.NodeGone for those attached here,
		// Replica.NodeGone for those an earlier leader had).
		failed := ev.Kind == membership.Failed && restartedFrom == ""
		switch {
		case restartedFrom != "":
			f.noteGone(replica.BootOf(ev.Member.Name, restartedFrom))
		case ev.Kind == membership.Departed && ev.Member.Boot != "":
			f.noteGone(replica.BootOf(ev.Member.Name, ev.Member.Boot))
		}
		f.c.fwd.NodeGone(ev.Member.Name, failed)
		boot := ev.Member.Boot
		if restartedFrom != "" {
			boot = restartedFrom
		}
		for _, r := range f.c.host.all() {
			r.NodeGone(replica.BootOf(ev.Member.Name, boot), failed)
		}
		if restartedFrom == "" {
			// A restarted node removes its own (broker.dropStale).
			f.c.dropTransientOf(ev)
		}
	}
	switch {
	case ev.Kind == membership.Failed, ev.Kind == membership.Departed:
		// A departed node is as gone as a failed one. Its graceful stop
		// handed its leaderships off first, but one it could not hand
		// over (handOff gives up after a few seconds) would otherwise
		// wait out the queue's heartbeat timeout. Members following a
		// new leader ignore it.
		for _, r := range f.c.host.all() {
			r.LeaderSuspected(ev.Member.Name)
		}
		how := "failed"
		if ev.Kind == membership.Departed {
			how = "left"
		}
		f.c.log.Info("node "+how+"; queues still led by it elect new leaders", "node", ev.Member.Name)
	case restartedFrom != "":
		// Its members lead nothing since: a member that led may win
		// again by itself, but not on a drained node, and this node's
		// members would wait out their timeout for the old leader.
		for _, r := range f.c.host.all() {
			r.LeaderRestarted(ev.Member.Name)
		}
		f.c.log.Info("node restarted; queues it led elect new leaders", "node", ev.Member.Name)
	}
	return restartedFrom != ""
}

// Kill stops the node abruptly, as a crash would as far as the other
// nodes can tell: gossip and internal connections end without a goodbye
// and no queue hands its leadership off. For tests, and for a node whose
// storage failed (cmd/warren), which can no longer lead or follow.
func (n *Node) Kill() {
	c := n.cluster
	if c != nil {
		_ = c.gossip.Stop() // no Leave: the others see a failure
		c.grpc.Stop()
		_ = c.mux.Close() // nothing more goes out, heartbeats included
		// Nor forwarded calls: the releases of the channels closed
		// below, say, which a crashed node never sends.
		_ = c.pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.broker.Stopping()
	_ = n.server.Shutdown(ctx)
	<-n.served
	n.disk.Close()
	n.memory.Close()
	_ = n.broker.Close()
	if c != nil {
		close(c.stop)
		c.wg.Wait()
		c.closeTransport()
		_ = c.qlog.Close() // a crash releases the file as well
	}
}

// noteBoot remembers the boot gossip reports for a node and returns the
// one before it when the node restarted since (a restart quicker than
// gossip's failure detection shows only as new metadata).
func (f *failover) noteBoot(ev membership.Event) (restartedFrom string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev, seen := f.boots[ev.Member.Name]
	if ev.Member.Boot != "" {
		f.boots[ev.Member.Name] = ev.Member.Boot
	}
	if seen && prev != "" && ev.Member.Boot != "" && prev != ev.Member.Boot {
		return prev
	}
	return ""
}

// startAlive reports whether gossip sees alive the start of a node whose
// replica.NodeTag is tag (this node's own among them).
func (f *failover) startAlive(tag uint32) bool {
	if f.c.gossip == nil {
		return false
	}
	for _, m := range f.c.gossip.Members() {
		if m.State == membership.Alive && m.Boot != "" && replica.NodeTag(replica.BootOf(m.Name, m.Boot)) == tag {
			return true
		}
	}
	return false
}

// goneStarts are the NodeTags of node starts that are over for good (the
// node restarted since, or left), the latest maxGoneStarts of them.
type goneStarts struct {
	tags  map[uint32]struct{}
	order []uint32
}

// maxGoneStarts bounds goneStarts: a node restarted that many times since
// a queue's consumer of its start was last heard of is forgotten, and its
// messages wait out the disconnected timeout instead.
const maxGoneStarts = 4096

// noteGone records that node start (replica.BootOf) is over, and reports
// whether that is news.
func (f *failover) noteGone(start string) (news bool) {
	tag := replica.NodeTag(start)
	f.mu.Lock()
	defer f.mu.Unlock()
	g := &f.gone
	if g.tags == nil {
		g.tags = make(map[uint32]struct{})
	}
	if _, ok := g.tags[tag]; ok {
		return false
	}
	if len(g.order) >= maxGoneStarts {
		delete(g.tags, g.order[0])
		g.order = g.order[1:]
	}
	g.tags[tag] = struct{}{}
	g.order = append(g.order, tag)
	return true
}

// previousGone lets go of what the consumers of the earlier starts a
// node announces (membership.Meta.Previous) hold, the ones this node did
// not see end: after the whole cluster restarted, none saw the others'
// (boots.go). Unlike a restart seen happen, this says nothing of the
// node's current start, whose members may lead already.
func (f *failover) previousGone(ev membership.Event) {
	for _, p := range ev.Member.Previous {
		if p == "" || p == ev.Member.Boot {
			continue
		}
		start := replica.BootOf(ev.Member.Name, p)
		if !f.noteGone(start) {
			continue
		}
		for _, r := range f.c.host.all() {
			r.NodeGone(start, false)
		}
	}
}

// startGone reports whether the node start whose replica.NodeTag is tag is
// over for good, as far as this node has seen (replica.Config.StartGone).
// A start that is alive again (a tag shared by chance) is not.
func (f *failover) startGone(tag uint32) bool {
	f.mu.Lock()
	_, gone := f.gone.tags[tag]
	f.mu.Unlock()
	return gone && !f.startAlive(tag)
}

// newBoot is a random name for this start of the node.
func newBoot() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
