package membership

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Meta is what a node tells the others about itself.
type Meta struct {
	Name     string `json:"name"`
	AMQP     string `json:"amqp"`     // client address
	Internal string `json:"internal"` // Raft and forwarding address
	Gossip   string `json:"gossip"`
	Version  string `json:"version"`
	// Boot is random for each start of the node's process: consumers
	// cancelled on a node keep their messages while it is up, and a node
	// that restarted (its channels gone) is another boot.
	Boot string `json:"boot,omitempty"`
	// Previous are the node's boots before this one, oldest first (a
	// few): after the whole cluster restarted, no node saw another's
	// earlier start end, and this tells them it did.
	Previous []string `json:"previous,omitempty"`
	// Leaving is announced just before a graceful leave: memberlist
	// reports a goodbye and a failure alike, and the metadata group must
	// tell a node that left for good from one that may come back.
	Leaving bool `json:"leaving,omitempty"`
	// Alarms are the node's resource alarms in effect ("memory",
	// "disk"): while any node has one, every node blocks its publishers.
	Alarms []string `json:"alarms,omitempty"`
	// QueueMachine is the newest quorum queue machine version the node's
	// build applies (raftq.MachineVersion): a queue's leader raises the
	// queue's version only as far as every member's node goes. Builds
	// before machine versions leave it out (0), and apply version 1.
	QueueMachine int `json:"queue_machine,omitempty"`
}

// State is a member's liveness as gossip sees it.
type State int

const (
	Alive State = iota
	Suspect
	Dead
	Left
)

func (s State) String() string {
	return [...]string{"alive", "suspect", "dead", "left"}[s]
}

// Member is one node as this node currently sees it.
type Member struct {
	Meta
	State State
}

// EventKind says what happened to a member.
type EventKind int

const (
	Joined EventKind = iota
	Updated
	Failed // stopped answering; may come back as itself
	Departed
)

// Event reports a change of one member.
type Event struct {
	Kind   EventKind
	Member Member
}

// Config configures this node's membership.
type Config struct {
	Meta Meta
	// BindAddr is the gossip address (host:port); port 0 picks one.
	BindAddr string
	// SecretKey, if set, encrypts gossip (16, 24 or 32 bytes, AES).
	SecretKey []byte
	// ProbeInterval and ProbeTimeout tune failure detection; zero keeps
	// memberlist's LAN defaults.
	ProbeInterval, ProbeTimeout time.Duration
	// SuspicionMult scales how long a suspected member has to refute
	// the suspicion before it is declared failed (times the probe
	// interval, more in larger clusters); zero is 2, half memberlist's
	// LAN default. A failed node's queues elect new leaders as soon as it
	// is declared failed, so this is most of their failover time; a live
	// node refutes a suspicion in well under a second.
	SuspicionMult int
	// ReconnectInterval is how often the members seen dead are joined
	// again (reconnect.go); zero is 2 s.
	ReconnectInterval time.Duration
	Log               *slog.Logger
}

// Membership is this node's view of the cluster.
type Membership struct {
	ml     *memberlist.Memberlist
	addr   string // gossip address, fixed at Start
	events chan Event
	log    *slog.Logger

	// localMu serializes changes of local, this node's metadata, and
	// their announcements.
	localMu sync.Mutex
	local   Meta

	// metaMu guards meta, which memberlist reads (NodeMeta) while it
	// holds its own locks: nothing else may be held with it.
	metaMu sync.Mutex
	meta   []byte

	// mu guards members: every node the events told of, by name; and
	// onEvent (OnEvent), called under it so that it sees them in order.
	mu      sync.Mutex
	members map[string]Member
	onEvent func(Event)

	rec *reconnector
}

// Start begins gossiping. Events arrive on Events(); a slow reader delays
// gossip, so read them promptly.
func Start(cfg Config) (*Membership, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	host, portStr, err := net.SplitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", cfg.BindAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("gossip port %q: %w", portStr, err)
	}
	m := &Membership{events: make(chan Event, 256), log: cfg.Log, members: make(map[string]Member)}

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Meta.Name
	mc.BindAddr = host
	mc.BindPort = port
	mc.AdvertisePort = port
	if cfg.ProbeInterval > 0 {
		mc.ProbeInterval = cfg.ProbeInterval
	}
	if cfg.ProbeTimeout > 0 {
		mc.ProbeTimeout = cfg.ProbeTimeout
	}
	mc.SuspicionMult = 2
	if cfg.SuspicionMult > 0 {
		mc.SuspicionMult = cfg.SuspicionMult
	}
	mc.SecretKey = cfg.SecretKey
	mc.Events = &eventDelegate{m: m}
	mc.Delegate = &metaDelegate{m: m}
	mc.LogOutput = logWriter{cfg.Log.With("component", "memberlist")}

	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("start gossip on %s: %w", cfg.BindAddr, err)
	}
	m.ml = ml
	// Read once: memberlist rewrites its local node on every UpdateNode.
	m.addr = ml.LocalNode().Address()
	cfg.Meta.Gossip = m.addr
	// The local node was created before its metadata was final.
	if err := m.announce(func(meta *Meta) { *meta = cfg.Meta }, time.Second); err != nil {
		m.log.Warn("announce local metadata", "err", err)
	}
	m.rec = newReconnector()
	go m.reconnect(m.rec, cmp.Or(cfg.ReconnectInterval, defaultReconnectInterval))
	return m, nil
}

// Join contacts the seeds (host:port, or a DNS name whose A/AAAA records
// are the peers, with the default gossip port) and returns how many
// answered.
func (m *Membership) Join(seeds []string) (int, error) {
	n, err := m.ml.Join(seeds)
	if err != nil && n == 0 {
		return 0, fmt.Errorf("join %v: %w", seeds, err)
	}
	return n, nil
}

// Events delivers membership changes.
func (m *Membership) Events() <-chan Event { return m.events }

// Members is this node's view of every known node, itself included, as
// the events reported them (a node that failed or left stays listed, with
// that state).
func (m *Membership) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.members))
	for _, mb := range m.members {
		out = append(out, mb)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Member is one node as the events reported it, false if they never
// named it.
func (m *Membership) Member(name string) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb, ok := m.members[name]
	return mb, ok
}

// LocalAddr is the gossip address other nodes reach this one at.
func (m *Membership) LocalAddr() string { return m.addr }

// Leave announces a graceful departure and stops gossiping.
func (m *Membership) Leave(timeout time.Duration) error {
	m.rec.close()
	err := m.announce(func(meta *Meta) { meta.Leaving = true }, timeout)
	return errors.Join(err, m.ml.Leave(timeout), m.ml.Shutdown())
}

// SetAlarms announces this node's resource alarms in effect (none: nil).
// The others learn of them as of any metadata change, within a gossip
// round or two; waiting for that is up to timeout.
func (m *Membership) SetAlarms(alarms []string, timeout time.Duration) error {
	return m.announce(func(meta *Meta) { meta.Alarms = slices.Clone(alarms) }, timeout)
}

// announce changes this node's metadata and gossips it.
func (m *Membership) announce(change func(*Meta), timeout time.Duration) error {
	m.localMu.Lock()
	defer m.localMu.Unlock()
	change(&m.local)
	meta, err := json.Marshal(m.local)
	if err != nil {
		return fmt.Errorf("encode node metadata: %w", err)
	}
	m.metaMu.Lock()
	m.meta = meta
	m.metaMu.Unlock()
	m.mu.Lock()
	m.members[m.local.Name] = Member{Meta: m.local, State: Alive}
	m.mu.Unlock()
	if err := m.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("announce node metadata: %w", err)
	}
	return nil
}

// Stop stops gossiping without a goodbye (others will see a failure).
func (m *Membership) Stop() error {
	m.rec.close()
	return m.ml.Shutdown()
}

func decodeMeta(n *memberlist.Node) (Meta, error) {
	var meta Meta
	if err := json.Unmarshal(n.Meta, &meta); err != nil {
		return Meta{}, fmt.Errorf("member %s: bad metadata: %w", n.Name, err)
	}
	return meta, nil
}

func (m *Membership) emit(kind EventKind, n *memberlist.Node, st State) {
	if len(n.Meta) == 0 {
		return // this node, before Start announced its metadata
	}
	meta, err := decodeMeta(n)
	if err != nil {
		m.log.Warn("ignoring member", "err", err)
		return
	}
	ev := Event{Kind: kind, Member: Member{Meta: meta, State: st}}
	m.mu.Lock()
	m.members[n.Name] = ev.Member
	if m.onEvent != nil {
		m.onEvent(ev)
	}
	m.mu.Unlock()
	m.events <- ev
}

// OnEvent has fn called with every member as gossip sees it now (this
// node too), then with every event as it happens, on gossip's goroutine
// and in order, before Events delivers it: for state that must follow
// membership without waiting for Events' reader. fn must be quick and
// must not call the Membership.
func (m *Membership) OnEvent(fn func(Event)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onEvent = fn
	for _, mb := range m.members {
		kind := Updated
		switch mb.State {
		case Dead:
			kind = Failed
		case Left:
			kind = Departed
		}
		fn(Event{Kind: kind, Member: mb})
	}
}

type eventDelegate struct{ m *Membership }

func (d *eventDelegate) NotifyJoin(n *memberlist.Node)   { d.m.emit(Joined, n, Alive) }
func (d *eventDelegate) NotifyUpdate(n *memberlist.Node) { d.m.emit(Updated, n, Alive) }
func (d *eventDelegate) NotifyLeave(n *memberlist.Node) {
	// memberlist reports both a goodbye and a failure as a leave; the
	// Leaving flag the node announced before going tells them apart.
	if meta, err := decodeMeta(n); err == nil && meta.Leaving || n.State == memberlist.StateLeft {
		d.m.emit(Departed, n, Left)
		return
	}
	d.m.emit(Failed, n, Dead)
}

type metaDelegate struct{ m *Membership }

func (d *metaDelegate) NodeMeta(limit int) []byte {
	d.m.metaMu.Lock()
	defer d.m.metaMu.Unlock()
	if len(d.m.meta) > limit {
		return nil
	}
	return d.m.meta
}
func (d *metaDelegate) NotifyMsg([]byte)                {}
func (d *metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (d *metaDelegate) LocalState(bool) []byte          { return nil }
func (d *metaDelegate) MergeRemoteState([]byte, bool)   {}

// logWriter passes memberlist's log lines ("[DEBUG] memberlist: ...") to
// slog at their level.
type logWriter struct{ l *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	switch {
	case strings.Contains(line, "[ERR]"):
		w.l.Error(line)
	case strings.Contains(line, "[WARN]"):
		w.l.Warn(line)
	default:
		w.l.Debug(line)
	}
	return len(p), nil
}

var _ io.Writer = logWriter{}
