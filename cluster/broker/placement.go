package broker

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// Leader locators (x-queue-leader-locator, policy queue-leader-locator).
const (
	// LocatorBalanced puts a new queue's leader on the node leading the
	// fewest queues. Warren's default: RabbitMQ's is client-local.
	LocatorBalanced = "balanced"
	// LocatorClientLocal puts it on the node the client declared it on.
	LocatorClientLocal = "client-local"
)

// defaultGroupSize is x-quorum-initial-group-size's default, as in
// RabbitMQ (capped by the number of nodes).
const defaultGroupSize = 3

func newQueueID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("read random queue ID: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// checkPlacementArgs validates the placement arguments of a quorum queue.
func checkPlacementArgs(what string, args wire.Table) error {
	if _, _, err := intArg(what, args, "x-quorum-initial-group-size", 1); err != nil {
		return err
	}
	// x-quorum-target-group-size (RabbitMQ 4.x): the size membership
	// reconciliation grows the queue to; checked as the initial size is.
	if _, _, err := intArg(what, args, "x-quorum-target-group-size", 1); err != nil {
		return err
	}
	if l, ok := args["x-queue-leader-locator"]; ok {
		s, isStr := l.(string)
		if !isStr {
			return wire.Errorf(wire.PreconditionFailed, "invalid arg 'x-queue-leader-locator' for %s: {unacceptable_type,%s}", what, typeName(l))
		}
		if _, known := locatorOf(s); !known {
			return wire.Errorf(wire.PreconditionFailed, "invalid arg 'x-queue-leader-locator' for %s: {unknown_leader_locator,<<\"%s\">>}", what, s)
		}
	}
	return nil
}

// locatorOf maps a locator name to Warren's two strategies; RabbitMQ's
// older names (random, least-leaders) mean balanced there too.
func locatorOf(s string) (string, bool) {
	switch s {
	case LocatorClientLocal:
		return LocatorClientLocal, true
	case LocatorBalanced, "random", "least-leaders":
		return LocatorBalanced, true
	}
	return "", false
}

// place picks a replicated queue's members and first leader. A durable
// classic queue lives on the declaring node alone. A quorum queue gets
// x-quorum-initial-group-size members (3 by default, at most the number
// of nodes): its leader on the declaring node for client-local, else on
// the node leading the fewest queues, and the other members on the nodes
// holding the fewest replicas, so that load spreads evenly.
func (b *Broker) place(rec *catalog.Queue, args wire.Table) {
	self := b.cfg.NodeID
	var nodes []string
	if b.cfg.Cluster != nil {
		nodes = b.cfg.Cluster.PlacementNodes()
	}
	// PlacementNodes leaves drained nodes out, this one included: the
	// declaring node is added back only when nothing else is left
	// (nodes.go), and a client-local leader then falls back to balanced.
	selfPlaced := slices.Contains(nodes, self)
	if len(nodes) == 0 {
		nodes, selfPlaced = []string{self}, true
	}
	if rec.Type != QueueTypeQuorum {
		rec.Members, rec.Leader = []string{self}, self
		return
	}
	if len(nodes) == 1 {
		rec.Members, rec.Leader = []string{nodes[0]}, nodes[0]
		return
	}
	size := int64(defaultGroupSize)
	if n, ok, _ := intArg("", args, "x-quorum-initial-group-size", 1); ok {
		size = n
	}
	size = min(size, int64(len(nodes)))
	leads, replicas := b.placementCounts()
	locator := LocatorBalanced
	if s, ok := args["x-queue-leader-locator"].(string); ok {
		locator, _ = locatorOf(s)
	}
	leader := self
	if locator == LocatorBalanced || !selfPlaced {
		leader = slices.MinFunc(nodes, func(a, b string) int {
			if d := leads[a] - leads[b]; d != 0 {
				return d
			}
			if d := replicas[a] - replicas[b]; d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
	}
	others := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == leader })
	slices.SortStableFunc(others, func(a, b string) int { return replicas[a] - replicas[b] })
	rec.Leader = leader
	rec.Members = append([]string{leader}, others[:size-1]...)
	slices.Sort(rec.Members)
}

// placementCounts counts, over every replicated queue this node knows,
// the queues each node was chosen to lead and the replicas it holds.
func (b *Broker) placementCounts() (leads, replicas map[string]int) {
	leads, replicas = make(map[string]int), make(map[string]int)
	vhosts := b.selectVhosts("")
	for _, v := range vhosts {
		v.mu.RLock()
		for _, q := range v.queues {
			if q.rec.Type != QueueTypeQuorum {
				continue
			}
			leads[q.rec.Leader]++
			for _, m := range q.rec.Members {
				replicas[m]++
			}
		}
		v.mu.RUnlock()
	}
	return leads, replicas
}
