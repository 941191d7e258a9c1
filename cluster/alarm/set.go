// Package alarm keeps a node's resource alarms, as RabbitMQ's rabbit_alarm
// does: a node raises an alarm when its queues hold too many message bytes
// in memory or its disk runs low on free space, and while any node of the
// cluster has an alarm in effect, every node blocks its publishing
// connections (connection.blocked, and their sockets go unread) until
// consumers, purges or an operator clear it. Consumers carry on meanwhile:
// they are what clears a memory alarm.
//
// A node's own alarms come from its monitors (the memory budget, DiskMonitor);
// the other nodes' arrive by gossip, and a node that fails or leaves takes
// its alarms with it.
package alarm

import (
	"cmp"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Resource is what an alarm is about.
type Resource string

const (
	Memory Resource = "memory"
	Disk   Resource = "disk"
)

// Alarm is a resource alarm in effect on a node.
type Alarm struct {
	Node     string
	Resource Resource
}

// Set is the alarms in effect across the cluster as this node knows them.
// Publishers read it on every publish, so its "nothing anywhere" answer is
// one atomic load.
type Set struct {
	self string
	log  *slog.Logger

	// any is whether byNode holds an alarm: the publish path's fast test.
	any atomic.Bool

	mu     sync.Mutex
	byNode map[string][]Resource // sorted, each resource once
	// changed is closed and replaced whenever any node's alarms change;
	// localChanged only when this node's do (what gossip announces).
	changed, localChanged chan struct{}
}

// NewSet returns the alarm set of node self, with no alarm in effect.
func NewSet(self string, log *slog.Logger) *Set {
	if log == nil {
		log = slog.Default()
	}
	return &Set{
		self: self, log: log,
		byNode:       make(map[string][]Resource),
		changed:      make(chan struct{}),
		localChanged: make(chan struct{}),
	}
}

// Self is the node whose set this is.
func (s *Set) Self() string { return s.self }

// Raise puts this node's alarm for r in effect (again: raising twice is
// one alarm).
func (s *Set) Raise(r Resource) { s.setLocal(r, true) }

// Clear ends this node's alarm for r, if it was in effect.
func (s *Set) Clear(r Resource) { s.setLocal(r, false) }

func (s *Set) setLocal(r Resource, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	have := s.byNode[s.self]
	if slices.Contains(have, r) == on {
		return
	}
	if on {
		s.log.Warn("resource alarm raised: publishers are blocked across the cluster", "resource", r)
	} else {
		s.log.Info("resource alarm cleared", "resource", r)
	}
	next := slices.DeleteFunc(slices.Clone(have), func(x Resource) bool { return x == r })
	if on {
		next = append(next, r)
		slices.Sort(next)
	}
	s.putLocked(s.self, next)
	close(s.localChanged)
	s.localChanged = make(chan struct{})
}

// SetNode records the alarms another node announced (gossip); an empty
// list clears them. This node's own are its monitors' business, so a
// stale announcement of them is ignored.
func (s *Set) SetNode(node string, rs []Resource) {
	if node == s.self {
		return
	}
	rs = slices.Clone(rs)
	slices.Sort(rs)
	rs = slices.Compact(rs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(s.byNode[node], rs) {
		return
	}
	if len(rs) > 0 {
		s.log.Warn("resource alarm in effect on another node: publishers are blocked", "node", node, "resources", rs)
	} else if len(s.byNode[node]) > 0 {
		s.log.Info("another node's resource alarms cleared", "node", node)
	}
	s.putLocked(node, rs)
}

// ForgetNode drops the alarms of a node that failed or left: as in
// RabbitMQ, a node that is down blocks nobody.
func (s *Set) ForgetNode(node string) { s.SetNode(node, nil) }

func (s *Set) putLocked(node string, rs []Resource) {
	if len(rs) == 0 {
		delete(s.byNode, node)
	} else {
		s.byNode[node] = rs
	}
	s.any.Store(len(s.byNode) > 0)
	close(s.changed)
	s.changed = make(chan struct{})
}

// Local is this node's own alarms in effect, sorted.
func (s *Set) Local() []Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.byNode[s.self])
}

// LocalChanged is closed the next time this node's own alarms change.
func (s *Set) LocalChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.localChanged
}

// All is every alarm in effect, by node then resource.
func (s *Set) All() []Alarm {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Alarm
	for node, rs := range s.byNode {
		for _, r := range rs {
			out = append(out, Alarm{Node: node, Resource: r})
		}
	}
	slices.SortFunc(out, func(a, b Alarm) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Resource, b.Resource))
	})
	return out
}

// Blocking says whether publishers must wait: "" and nil while no node has
// an alarm in effect; otherwise the reason connection.blocked gives
// (RabbitMQ's: "low on memory", "low on disk", or both joined by " & ")
// and a channel closed at the next change, after which the caller asks
// again.
func (s *Set) Blocking() (reason string, changed <-chan struct{}) {
	if !s.any.Load() {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byNode) == 0 {
		return "", nil
	}
	var kinds []Resource
	for _, rs := range s.byNode {
		kinds = append(kinds, rs...)
	}
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	parts := make([]string, len(kinds))
	for i, r := range kinds {
		parts[i] = "low on " + string(r)
	}
	return strings.Join(parts, " & "), s.changed
}

// Flip returns a function that raises resource r's alarm when told on
// and clears it when told off: what a memory budget calls as it crosses
// its limit, so that the budget needs no alarm set of its own.
func (s *Set) Flip(r Resource) func(on bool) {
	return func(on bool) {
		if on {
			s.Raise(r)
		} else {
			s.Clear(r)
		}
	}
}
