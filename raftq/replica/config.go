package replica

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/classic"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/wal"
)

// Config is what a replica needs to open.
type Config struct {
	// Name identifies the queue in logs ("vhost/name").
	Name string
	// Dir holds the group's snapshots, and its log and stable store
	// (a write-ahead log of its own in Dir/wal) unless WAL is set.
	Dir string
	// WAL, when set, is the node's write-ahead log, which holds the
	// group's log and stable store (as group LogGroup): a node's groups
	// then share its writes and fsyncs. Close leaves it open; Delete drops
	// the group from it. A log.db left in Dir by an earlier version is
	// moved into it.
	WAL *wal.Log
	// Payloads bounds, with the node's other replicas, the payloads this
	// one keeps in memory for delivery; nil leaves only its own bound.
	Payloads *PayloadCache
	// LogGroup names the group in WAL; empty means Dir's base name.
	LogGroup string
	// NodeID is this node's Raft server ID.
	NodeID string
	// Arguments are the queue's declared x-arguments.
	Arguments wire.Table
	// Created is the queue's creation time (Unix ms), the same on every
	// member, so that machines start alike.
	Created int64
	// Classic makes the machine follow classic queue rules (no delivery
	// limit, classic priorities): a durable classic queue keeps its
	// messages in a one-member group's log, the quorum queue's single-node
	// storage, so that they survive a restart.
	Classic bool
	// OnExpired is called (on its own goroutine) when x-expires says the
	// queue should be deleted.
	OnExpired func()
	// DeadLetter publishes a message the queue dead-lettered for reason at
	// time at (Unix ms) to its dead-letter exchange, and calls done once:
	// with nil when every target queue has stored it, else with why not.
	// It may block (a target's Enqueue does); the replica calls it from a
	// goroutine of its own, never with its locks held (deadletter.go). Nil
	// drops dead-lettered messages.
	DeadLetter func(ctx context.Context, m *queue.Message, reason raftq.Reason, at int64, done func(error))
	Log        *slog.Logger

	// Transport carries the group's Raft traffic to its other members
	// (cluster/transport's Mux.Transport in a cluster). Nil makes a
	// one-member group on an in-memory transport, the single-node case:
	// Open then waits until it leads.
	Transport raft.Transport
	// Peers are every member of the group, this node included, with
	// their Raft addresses. Ignored without a Transport.
	Peers []Peer
	// Bootstrap creates the group with Peers as voters when this node has
	// no state for it yet, and campaigns at once: the member chosen to
	// lead first. With Follow, a new group's other members keep the same
	// configuration unwritten, to bootstrap with only should the chosen
	// member be reported failed before they have heard from it
	// (failover.go's bootstrapLate); writing it at once cost every
	// declaration a write on each of them.
	Bootstrap bool
	Follow    bool
	// Rebootstrap is called, in a goroutine of its own, when a new
	// group's member opened with Follow must write the group's first
	// configuration (failover.go's bootstrapLate) but raft refuses to
	// bootstrap it while it runs: it voted in the group's first election,
	// so it holds a term, yet heard nothing from the leader it elected,
	// whose node gossip now reports failed or gone. The node closes the
	// replica and opens it again with Rebootstrapped and members (the
	// nodes of the configuration it kept) as its Peers. Nil leaves the
	// member without a configuration, so without a vote, until that
	// leader's node returns.
	Rebootstrap func(members []string)
	// Rebootstrapped makes Open write Peers as the group's first
	// configuration, as Bootstrap would have, on a member that holds a
	// term but no log entry and no snapshot (Rebootstrap).
	Rebootstrapped bool
	// SeesAlive asks the node of member peer whether its gossip sees node
	// alive. A member whose own gossip calls its leader's node failed
	// campaigns only when a majority of the voters' nodes agree (failover.go);
	// nil asks only whether they answer at all.
	SeesAlive func(ctx context.Context, peer, node string) (bool, error)
	// LeadsAt asks node whether its member of this group leads it. Before
	// campaigning because gossip called the leader's node failed, a member
	// asks the leader itself (failover.go): gossip's verdict can be stale
	// just after a partition heals, when the leader is alive and leading.
	// Nil skips the question.
	LeadsAt func(ctx context.Context, node string) (bool, error)
	// SettleAtLeader passes settlements of this member's deliveries from
	// when it led on to the group's leader (former.go); it must not block.
	// Nil drops them, and their messages are handed out again.
	SettleAtLeader func([]HeldSettlement)
	// SettleDeliveriesAtLeader passes settlements of deliveries this
	// member does not know of (handed out in entries it has not applied)
	// on to the group's leader, by delivery ID (unknown.go); it must not
	// block. Nil drops them.
	SettleDeliveriesAtLeader func(op raftq.Op, cause queue.ReturnCause, deliveries []uint64)
	// StartAlive reports whether the start of a node whose NodeTag is tag
	// is alive as gossip sees it. A new leader keeps the messages of its
	// predecessor's cancelled consumers and getters of such a node for
	// their channels to settle (former.go); nil returns them after
	// OrphanGrace.
	StartAlive func(tag uint32) bool
	// StartGone reports whether the start of a node whose NodeTag is tag
	// is over for good: the node restarted since, or left the cluster. Its
	// channels are gone, so a new leader lets go at once of what that
	// start's consumers hold (consumerTable.reap) rather than waiting out the
	// disconnected timeout for them; nil knows of none.
	StartGone func(tag uint32) bool
	// MachineVersion is the newest queue machine version a node's build
	// applies (as it announces), 0 for a node not heard from yet: the
	// leader raises the queue's version only as far as every member's
	// node goes (UpgradeMachine), counting 0 as 1. Nil knows only this
	// node, which applies raftq.MachineVersion.
	MachineVersion func(node string) int
	// AppliesUpTo, when positive, makes the member stop on an entry that
	// needs a newer machine version (raftq.Command.Needs), as a build
	// that applies only that far does: tests stand in an older build
	// with it.
	AppliesUpTo uint32
	// DisconnectedTimeout is the queue's consumer disconnected timeout
	// (DisconnectedTimeoutOf its effective arguments), read whenever a
	// consumer's node is cut off (disconnected.go); nil is zero, the
	// messages returning at once.
	DisconnectedTimeout func() time.Duration
	// HeartbeatTimeout and ElectionTimeout of a multi-member group; zero
	// picks one second each.
	HeartbeatTimeout, ElectionTimeout time.Duration
	// FirstCandidate, when a voter, is ranked first among the members that
	// campaign after a start on existing state (failover.go): a group
	// woken from hibernation keeps the leader it had, so that leaders
	// stay spread over the nodes.
	FirstCandidate string
	// Drained opens the member drained (SetDrained), so that it takes no
	// part in the elections after its start.
	Drained bool
	// PublishLinger is how long the leader may hold a publish for others
	// to share its log write, syncs and AppendEntries (linger.go); zero
	// sends each at once.
	PublishLinger time.Duration
	// PublishLingerShare, if not zero, holds publishes only while
	// PublishLinger is at most that share of the leader's recent commit
	// p99, and for at most that share (committail.go).
	PublishLingerShare float64
	// PublishLingerBatch, with PublishLingerShare, holds publishes while
	// commits are too quick for the share's hold too, but only until
	// this many are held (at least 2): a publish then waits at most for
	// the next one, so that publishes arriving together share an entry
	// (linger.go). Zero holds none while commits are quick.
	PublishLingerBatch int
}

// Peer is one member of a group: its node name (the Raft server ID) and
// its node's internal address.
type Peer struct{ ID, Addr string }

// parseArguments reads a queue's x-arguments into its machine's Config,
// by the quorum queue's rules or, for a classic queue, by raftq/classic's;
// dlxOnReject is x-overflow=reject-publish-dlx (classic only). Open and
// Reconfigure both parse here, so a queue's arguments mean the same
// whether it was declared with them or a policy brought them.
func parseArguments(classicRules bool, args wire.Table) (cfg raftq.Config, dlxOnReject bool, err error) {
	if classicRules {
		cfg, dlxOnReject, err = classic.ParseConfig(args)
	} else {
		cfg, err = raftq.ParseConfig(map[string]any(args))
	}
	if err != nil {
		return cfg, false, fmt.Errorf("queue arguments: %w", err)
	}
	return cfg, dlxOnReject, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
