package metaraft

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/warrenmq/warren/cluster/catalog"
)

// recentProposals is how many proposal IDs the state machine remembers to
// recognise a retried proposal. Retries happen within seconds of the
// first attempt; metadata proposals are a few per second at most.
const recentProposals = 4096

// snapshotVersion is the version of the snapshot layout Persist writes.
const snapshotVersion = 1

// state is the metadata state machine: every record, keyed as BoltStore
// keys it, plus the outcomes of recent proposals. It is a pure function
// of the entries applied to it: no clock, no randomness, and nothing that
// depends on map iteration order leaves it.
type state struct {
	vhosts      map[string]catalog.Vhost
	users       map[string]catalog.User
	permissions map[string]catalog.Permission
	exchanges   map[string]catalog.Exchange
	bindings    map[string]catalog.Binding
	queues      map[string]catalog.Queue
	policies    map[string]catalog.Policy
	nodes       map[string]catalog.Node

	// recent holds the last proposal IDs applied, oldest first; seen
	// maps each to its outcome (true: refused with ErrExists).
	recent []string
	seen   map[string]bool

	// index is the log index of the last entry applied.
	index uint64
}

func newState() *state {
	return &state{
		vhosts:      map[string]catalog.Vhost{},
		users:       map[string]catalog.User{},
		permissions: map[string]catalog.Permission{},
		exchanges:   map[string]catalog.Exchange{},
		bindings:    map[string]catalog.Binding{},
		queues:      map[string]catalog.Queue{},
		policies:    map[string]catalog.Policy{},
		nodes:       map[string]catalog.Node{},
		seen:        map[string]bool{},
	}
}

// Record kinds, one per table.
const (
	kindVhost byte = iota
	kindUser
	kindPermission
	kindExchange
	kindBinding
	kindQueue
	kindPolicy
	kindNode
)

// key is metadata.Key as a map key: records are keyed exactly as
// metadata.BoltStore keys its buckets.
func key(parts ...string) string { return string(catalog.Key(parts...)) }

func bindingKey(b *catalog.Binding) string {
	return key(b.Vhost, b.Source, strconv.Itoa(int(b.Kind)), b.Destination, b.RoutingKey, string(b.Arguments))
}

// locate names a change's table and key. The change holds exactly one
// record (decodeEntry checked).
func locate(c *catalog.Change) (kind byte, k string) {
	switch {
	case c.Vhost != nil:
		return kindVhost, key(c.Vhost.Name)
	case c.User != nil:
		return kindUser, key(c.User.Name)
	case c.Permission != nil:
		return kindPermission, key(c.Permission.User, c.Permission.Vhost)
	case c.Exchange != nil:
		return kindExchange, key(c.Exchange.Vhost, c.Exchange.Name)
	case c.Binding != nil:
		return kindBinding, bindingKey(c.Binding)
	case c.Queue != nil:
		return kindQueue, key(c.Queue.Vhost, c.Queue.Name)
	case c.Policy != nil:
		return kindPolicy, string(catalog.PolicyKey(c.Policy))
	case c.Node != nil:
		return kindNode, key(c.Node.Name)
	}
	panic("meta: change without a record")
}

func (s *state) has(kind byte, k string) bool {
	var ok bool
	switch kind {
	case kindVhost:
		_, ok = s.vhosts[k]
	case kindUser:
		_, ok = s.users[k]
	case kindPermission:
		_, ok = s.permissions[k]
	case kindExchange:
		_, ok = s.exchanges[k]
	case kindBinding:
		_, ok = s.bindings[k]
	case kindQueue:
		_, ok = s.queues[k]
	case kindPolicy:
		_, ok = s.policies[k]
	case kindNode:
		_, ok = s.nodes[k]
	}
	return ok
}

// result is what applying an entry answers its proposer.
type result struct {
	// exists: an IfAbsent change found its record; nothing changed.
	exists bool
	// repeat: the proposal was applied before; nothing changed now and
	// exists repeats the first outcome.
	repeat bool
}

// changed reports whether the entry changed the state (and so makes an
// Update).
func (r result) changed() bool { return !r.exists && !r.repeat }

// apply applies one entry at log index: all of its changes, or none when
// an IfAbsent change finds its record (checked in order, as BoltStore
// does inside its transaction, so an earlier change of the same batch
// counts).
func (s *state) apply(index uint64, e *entry) result {
	s.index = index
	if exists, ok := s.seen[e.ID]; ok {
		return result{exists: exists, repeat: true}
	}
	type loc struct {
		kind byte
		k    string
	}
	present := map[loc]bool{}
	exists := false
	for i := range e.Changes {
		c := &e.Changes[i]
		kind, k := locate(c)
		l := loc{kind, k}
		p, ok := present[l]
		if !ok {
			p = s.has(kind, k)
		}
		if c.IfAbsent && p {
			exists = true
			break
		}
		present[l] = !c.Delete
	}
	s.remember(e.ID, exists)
	if exists {
		return result{exists: true}
	}
	for i := range e.Changes {
		s.change(&e.Changes[i])
	}
	return result{}
}

func (s *state) remember(id string, exists bool) {
	s.recent = append(s.recent, id)
	s.seen[id] = exists
	if len(s.recent) > recentProposals {
		delete(s.seen, s.recent[0])
		s.recent = s.recent[1:]
	}
}

// change applies one change, storing a copy of its record so that the
// caller's (the Update's) records stay the caller's.
func (s *state) change(c *catalog.Change) {
	kind, k := locate(c)
	if c.Delete {
		switch kind {
		case kindVhost:
			delete(s.vhosts, k)
		case kindUser:
			delete(s.users, k)
		case kindPermission:
			delete(s.permissions, k)
		case kindExchange:
			delete(s.exchanges, k)
		case kindBinding:
			delete(s.bindings, k)
		case kindQueue:
			// A deletion naming a queue's ID leaves a queue declared
			// again under the same name alone: a node clearing another
			// node's stale transient queues (broker/remote.go) must not
			// take its successor.
			if cur, ok := s.queues[k]; ok && c.Queue.ID != "" && cur.ID != "" && cur.ID != c.Queue.ID {
				return
			}
			delete(s.queues, k)
		case kindPolicy:
			delete(s.policies, k)
		case kindNode:
			delete(s.nodes, k)
		}
		return
	}
	switch kind {
	case kindVhost:
		s.vhosts[k] = cloneVhost(*c.Vhost)
	case kindUser:
		s.users[k] = cloneUser(*c.User)
	case kindPermission:
		s.permissions[k] = *c.Permission
	case kindExchange:
		s.exchanges[k] = cloneExchange(*c.Exchange)
	case kindBinding:
		s.bindings[k] = cloneBinding(*c.Binding)
	case kindQueue:
		s.queues[k] = cloneQueue(*c.Queue)
	case kindPolicy:
		s.policies[k] = clonePolicy(*c.Policy)
	case kindNode:
		s.nodes[k] = *c.Node
	}
}

func cloneUser(u catalog.User) catalog.User {
	u.Tags, u.Limits = slices.Clone(u.Tags), maps.Clone(u.Limits)
	return u
}
func cloneVhost(v catalog.Vhost) catalog.Vhost { v.Limits = maps.Clone(v.Limits); return v }
func cloneExchange(x catalog.Exchange) catalog.Exchange {
	x.Arguments = slices.Clone(x.Arguments)
	return x
}
func cloneBinding(b catalog.Binding) catalog.Binding {
	b.Arguments = slices.Clone(b.Arguments)
	return b
}
func cloneQueue(q catalog.Queue) catalog.Queue {
	q.Arguments = slices.Clone(q.Arguments)
	q.Members = slices.Clone(q.Members)
	return q
}
func clonePolicy(p catalog.Policy) catalog.Policy {
	p.Definition = slices.Clone(p.Definition)
	return p
}
func same[T any](v T) T { return v }

// sorted returns the table's records in key order (BoltStore's order),
// each copied by clone.
func sorted[T any](m map[string]T, clone func(T) T) []T {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]T, len(keys))
	for i, k := range keys {
		out[i] = clone(m[k])
	}
	return out
}

// snapshot returns a copy of every record, in BoltStore's order.
func (s *state) snapshot() *catalog.Snapshot {
	return &catalog.Snapshot{
		Vhosts:      sorted(s.vhosts, same[catalog.Vhost]),
		Users:       sorted(s.users, cloneUser),
		Permissions: sorted(s.permissions, same[catalog.Permission]),
		Exchanges:   sorted(s.exchanges, cloneExchange),
		Bindings:    sorted(s.bindings, cloneBinding),
		Queues:      sorted(s.queues, cloneQueue),
		Policies:    sorted(s.policies, clonePolicy),
		Nodes:       sorted(s.nodes, same[catalog.Node]),
	}
}

// persisted is the snapshot layout: a version, the index it reflects,
// every table sorted by key, and the recent proposals oldest first. The
// same state always gives the same bytes.
type persisted struct {
	Version     int                  `json:"version"`
	Index       uint64               `json:"index"`
	Vhosts      []catalog.Vhost      `json:"vhosts"`
	Users       []catalog.User       `json:"users"`
	Permissions []catalog.Permission `json:"permissions"`
	Exchanges   []catalog.Exchange   `json:"exchanges"`
	Bindings    []catalog.Binding    `json:"bindings"`
	Queues      []catalog.Queue      `json:"queues"`
	// Policies came after version 1's first layout; older snapshots
	// have none, which reads the same.
	Policies []catalog.Policy `json:"policies,omitempty"`
	// Nodes (drained nodes) came after Policies, the same way.
	Nodes  []catalog.Node      `json:"nodes,omitempty"`
	Recent []persistedProposal `json:"recent"`
}

type persistedProposal struct {
	ID     string `json:"id"`
	Exists bool   `json:"exists,omitempty"`
}

// persistedOf is snap as a snapshot at index holds it, without the
// recent proposals.
func persistedOf(snap *catalog.Snapshot, index uint64) persisted {
	return persisted{
		Version: snapshotVersion, Index: index,
		Vhosts: snap.Vhosts, Users: snap.Users, Permissions: snap.Permissions,
		Exchanges: snap.Exchanges, Bindings: snap.Bindings, Queues: snap.Queues,
		Policies: snap.Policies, Nodes: snap.Nodes,
	}
}

func (s *state) marshal() ([]byte, error) {
	p := persistedOf(s.snapshot(), s.index)
	p.Recent = make([]persistedProposal, len(s.recent))
	for i, id := range s.recent {
		p.Recent[i] = persistedProposal{ID: id, Exists: s.seen[id]}
	}
	return json.Marshal(p)
}

func unmarshalState(data []byte) (*state, error) {
	var p persisted
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("meta: decode snapshot: %w", err)
	}
	if p.Version != snapshotVersion {
		return nil, fmt.Errorf("meta: snapshot version %d, this build reads %d", p.Version, snapshotVersion)
	}
	s := newState()
	s.index = p.Index
	put := func(c catalog.Change) { s.change(&c) }
	for _, r := range p.Vhosts {
		put(catalog.Put(r))
	}
	for _, r := range p.Users {
		put(catalog.Put(r))
	}
	for _, r := range p.Permissions {
		put(catalog.Put(r))
	}
	for _, r := range p.Exchanges {
		put(catalog.Put(r))
	}
	for _, r := range p.Bindings {
		put(catalog.Put(r))
	}
	for _, r := range p.Queues {
		put(catalog.Put(r))
	}
	for _, r := range p.Policies {
		put(catalog.Put(r))
	}
	for _, r := range p.Nodes {
		put(catalog.Put(r))
	}
	for _, r := range p.Recent {
		s.remember(r.ID, r.Exists)
	}
	return s, nil
}
