package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// A fault breaks the cluster and returns what heals it. At most one fault
// is in force at a time. Most touch one node, so a majority of every
// three- or five-member queue lives throughout; the network shapes (halves,
// ring, bridge) leave some majority connected, and kill-minority a
// majority up. kill-all takes every node down at once: a confirmed message
// was committed and fsynced on a majority, so it must survive that too.
// Warren must lose no confirmed message under any of them.
type fault struct {
	name string
	// apply breaks the cluster, choosing its nodes with the nemesis's
	// random source, and returns the nodes affected, the shape (for the
	// network faults; "" otherwise) and the undoing.
	apply func(ctx context.Context) (nodes []int, shape string, heal func() error, err error)
}

// faultRecord is one fault as it happened, for the report.
type faultRecord struct {
	Kind  string   `json:"kind"`
	Nodes []string `json:"nodes"`
	// Shape is the network fault's groups: the halves, the ring in
	// order, the two halves and then the bridge node, the one-way cut's
	// sender then receiver.
	Shape     string    `json:"shape,omitempty"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Error     string    `json:"error,omitempty"`
	HealError string    `json:"heal_error,omitempty"`
}

// opRecord is one operator command as it happened, for the report: the
// warrenctl arguments, when it ran and why it failed ("" when it did not).
type opRecord struct {
	Command string    `json:"command"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Error   string    `json:"error,omitempty"`
}

// nemesis breaks the cluster on a schedule: a fault on random nodes, held
// for a random time in [hold/2, hold], then healed, then a pause of the
// same length; operators' commands (warrenctl) go between.
type nemesis struct {
	log       *slog.Logger
	c         *cluster
	w         *workload
	warrenctl string
	rng       *rand.Rand
	faults    []fault
	// deck is the faults still to deal before any is dealt again.
	deck []fault
	hold time.Duration
	// ops are the operator commands to interleave; empty for none.
	ops []string
	// events is the schedule as it happened, for the report.
	events []string
	// records are the faults as they happened, and counts how many of
	// each kind were applied, for the report.
	records []faultRecord
	counts  map[string]int
	// opLog is every operator command as it happened, for the report;
	// inForce names the fault held now ("" between faults), for the
	// progress line, which reads it from another goroutine.
	opLog   []opRecord
	inForce atomic.Pointer[string]
	// upgradeTo is the new build's binary during a rolling upgrade
	// (upgrade.go); upgraded counts the nodes moved to it so far.
	upgradeTo string
	upgraded  int
}

// faultNames are the faults newNemesis knows.
const faultNames = "kill, stop, pause, partition, alarm, halves, ring, bridge, oneway, loss, kill-minority, kill-all, latency, full-disk, corrupt, lose-unsynced"

// needsLab says whether a fault cuts links, which needs network namespaces.
func needsLab(fault string) bool {
	switch fault {
	case "partition", "halves", "ring", "bridge", "oneway", "loss", "latency":
		return true
	}
	return false
}

// newNemesis builds the faults named (faultNames) and the operations
// (rebalance, transfer, drain, member, checkpoint).
func newNemesis(log *slog.Logger, c *cluster, w *workload, warrenctl string, seed uint64, hold time.Duration, faults, ops []string) (*nemesis, error) {
	n := &nemesis{log: log, c: c, w: w, warrenctl: warrenctl, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), hold: hold, counts: map[string]int{}}
	// one makes a fault on one random node.
	one := func(apply func(ctx context.Context, i int) (func() error, error)) func(context.Context) ([]int, string, func() error, error) {
		return func(ctx context.Context) ([]int, string, func() error, error) {
			i := n.rng.IntN(len(c.nodes))
			heal, err := apply(ctx, i)
			return []int{i}, "", heal, err
		}
	}
	// network makes a fault that puts a plan into the namespaces.
	network := func(plan func() netPlan) func(context.Context) ([]int, string, func() error, error) {
		return func(context.Context) ([]int, string, func() error, error) {
			p := plan()
			heal := func() error {
				for i := range c.nodes {
					c.lab.heal(i)
				}
				return nil
			}
			return p.nodes(), p.describe(c.names()), heal, c.lab.apply(p)
		}
	}
	// kill makes a fault that kills the nodes pick chooses, all at once.
	kill := func(pick func() []int) func(context.Context) ([]int, string, func() error, error) {
		return func(context.Context) ([]int, string, func() error, error) {
			nodes := pick()
			return nodes, "", func() error { return c.restartAll(nodes) }, c.killAll(nodes)
		}
	}
	nn := len(c.nodes)
	for _, name := range faults {
		f := fault{name: name}
		if needsLab(name) && c.lab == nil {
			return nil, fmt.Errorf("the %s fault needs network namespaces: %s", name, labAvailable())
		}
		switch name {
		case "kill": // SIGKILL, then start again
			f.apply = one(func(_ context.Context, i int) (func() error, error) {
				nd := c.nodes[i]
				return nd.restart, nd.kill()
			})
		case "lose-unsynced": // SIGKILL, the node's unsynced writes dropped, then start (disks.go)
			if c.disks == nil {
				return nil, errors.New("the lose-unsynced fault needs the nodes' data directories on lazyfs (mountDisks)")
			}
			f.apply = one(func(_ context.Context, i int) (func() error, error) {
				var tear *rand.Rand // half the time a torn write-back
				if n.rng.IntN(2) == 0 {
					tear = n.rng
				}
				return c.nodes[i].restart, c.loseUnsynced(i, tear)
			})
		case "stop": // graceful stop (leaderships handed off first), then start
			f.apply = one(func(_ context.Context, i int) (func() error, error) {
				nd := c.nodes[i]
				return nd.restart, nd.stop()
			})
		case "pause": // SIGSTOP: a node that answers nothing but holds its connections
			f.apply = one(func(_ context.Context, i int) (func() error, error) {
				nd := c.nodes[i]
				return nd.resume, nd.pause()
			})
		case "partition": // cut from the other nodes; clients still reach it
			f.apply = one(func(_ context.Context, i int) (func() error, error) {
				return func() error { c.lab.heal(i); return nil }, c.lab.cut(i)
			})
		case "alarm": // a disk alarm on the node: publishers blocked on every node
			f.apply = one(func(ctx context.Context, i int) (func() error, error) {
				set := func(ctx context.Context, limit string) error {
					out, err := c.ctlNode(ctx, warrenctl, i, "set", "disk-free-limit", limit)
					if err != nil {
						return fmt.Errorf("%w: %s", err, firstLine(out))
					}
					return nil
				}
				heal := func() error { return set(context.Background(), "50MB") }
				return heal, set(ctx, "1000000TB") // above any free space
			})
		case "halves":
			f.apply = network(func() netPlan { return planHalves(n.rng, nn) })
		case "ring":
			f.apply = network(func() netPlan { return planRing(n.rng, nn) })
		case "bridge":
			f.apply = network(func() netPlan { return planBridge(n.rng, nn) })
		case "oneway":
			f.apply = network(func() netPlan { return planOneway(n.rng, nn) })
		case "loss":
			f.apply = network(func() netPlan { return planLoss(nn) })
		case "kill-minority":
			f.apply = kill(func() []int { return pickMinority(n.rng, nn) })
		case "corrupt": // SIGKILL, damage its storage files, then start again (corrupt.go)
			f.apply = n.corruptFault
		case "kill-all":
			f.apply = kill(func() []int {
				all := make([]int, nn)
				for i := range all {
					all[i] = i
				}
				return all
			})
		case "latency": // every link between nodes through a delaying proxy (latency.go)
			f.apply = n.latency
		case "full-disk": // one node's small data disk filled (fulldisk.go)
			f.apply = n.fullDisk
		default:
			return nil, fmt.Errorf("unknown fault %q (%s)", name, faultNames)
		}
		n.faults = append(n.faults, f)
	}
	for _, op := range ops {
		switch op {
		case "rebalance", "transfer", "drain", "member", "checkpoint":
		default:
			return nil, fmt.Errorf("unknown operation %q (rebalance, transfer, drain, member, checkpoint)", op)
		}
	}
	n.ops = ops
	return n, nil
}

func (n *nemesis) note(format string, args ...any) {
	e := fmt.Sprintf(format, args...)
	n.events = append(n.events, time.Now().Format("15:04:05.000")+" "+e)
	n.log.Info("nemesis", "event", e)
}

// run breaks and heals until ctx ends, leaving no fault in force.
func (n *nemesis) run(ctx context.Context) {
	for ctx.Err() == nil {
		if n.upgradeTo != "" && n.upgraded < len(n.c.nodes) {
			n.upgradeNext()
		}
		if len(n.faults) > 0 {
			n.inflict(ctx, n.deal())
		}
		if len(n.ops) > 0 && ctx.Err() == nil {
			n.operate(ctx, n.ops[n.rng.IntN(len(n.ops))])
		}
		sleep(ctx, n.span())
	}
}

// deal is the next fault: the faults are dealt like a shuffled deck, each
// once before any again, so that a short run applies every one of them
// (a smoke run's verdict says nothing of a fault it never drew).
func (n *nemesis) deal() fault {
	if len(n.deck) == 0 {
		n.deck = slices.Clone(n.faults)
		n.rng.Shuffle(len(n.deck), func(i, j int) { n.deck[i], n.deck[j] = n.deck[j], n.deck[i] })
	}
	f := n.deck[0]
	n.deck = n.deck[1:]
	return f
}

// inflict applies a fault, holds it for a span and heals it, recording
// and counting it.
func (n *nemesis) inflict(ctx context.Context, f fault) {
	r := faultRecord{Kind: f.name, Start: time.Now()}
	nodes, shape, heal, err := f.apply(ctx)
	for _, i := range nodes {
		r.Nodes = append(r.Nodes, n.c.nodes[i].name)
	}
	r.Shape = shape
	what := f.name + " " + strings.Join(r.Nodes, " ")
	if shape != "" {
		what += ": " + shape
	}
	n.note("%s", what)
	n.inForce.Store(&what)
	defer n.inForce.Store(nil)
	if err != nil {
		r.Error = err.Error()
		n.note("%s failed: %v", what, err)
	} else {
		n.counts[f.name]++
	}
	sleep(ctx, n.span())
	if heal != nil {
		if err := heal(); err != nil {
			r.HealError = err.Error()
			n.note("healing %s failed: %v", what, err)
		} else {
			n.note("healed %s", what)
		}
	}
	r.End = time.Now()
	n.records = append(n.records, r)
}

// countLine is how many faults of each kind were applied, by name.
func (n *nemesis) countLine() string {
	var parts []string
	for _, f := range n.faults {
		if slices.Contains(parts, f.name) {
			continue
		}
		parts = append(parts, f.name)
	}
	for i, name := range parts {
		parts[i] = fmt.Sprintf("%s %d", name, n.counts[name])
	}
	return strings.Join(parts, ", ")
}

// span is a random time in [hold/2, hold].
func (n *nemesis) span() time.Duration {
	return n.hold/2 + time.Duration(n.rng.Int64N(int64(n.hold/2)+1))
}

// operate runs one operator command. Commands may fail while the cluster
// recovers from the last fault (a node still joining, a leader not yet
// elected); that is logged, not judged: the checker judges the messages.
func (n *nemesis) operate(ctx context.Context, op string) {
	// Any queue, the sleepy ones too: a transfer or membership change of
	// a hibernating queue wakes it.
	all := slices.Concat(n.w.queues, n.w.sleepy, n.w.single)
	q := all[n.rng.IntN(len(all))]
	nd := n.c.nodes[n.rng.IntN(len(n.c.nodes))].name
	var steps [][]string
	switch op {
	case "rebalance":
		steps = [][]string{{"rebalance"}}
	case "transfer":
		steps = [][]string{{"transfer", "leadership", q, nd}}
	case "drain":
		steps = [][]string{{"drain", nd}, nil, {"undrain", nd}}
	case "member":
		// Out and back in: the new member joins as a non-voter and is
		// promoted once it has caught up, or half the time as a voter at
		// once, which the quorum counts while it catches up.
		add := []string{"add", "member", q, nd}
		if n.rng.IntN(2) == 0 {
			add = []string{"add", "member", "--membership", "voter", q, nd}
		}
		steps = [][]string{{"delete", "member", q, nd}, nil, add}
	case "checkpoint":
		// Every member snapshots and compacts its log: a member that
		// falls behind afterwards catches up from the snapshot. After a
		// hold, so that gossip sees the node just healed again: asked at
		// once, the command lists that node's member "not alive" and does
		// not checkpoint it.
		steps = [][]string{nil, {"force", "checkpoint", "--queue-pattern", "^" + regexp.QuoteMeta(q) + "$"}}
	}
	for _, s := range steps {
		if s == nil { // hold the state for a while
			sleep(ctx, n.span())
			continue
		}
		rec := opRecord{Command: strings.Join(s, " "), Start: time.Now()}
		out, err := n.c.ctl(context.Background(), n.warrenctl, s...)
		rec.End = time.Now()
		if err != nil {
			rec.Error = failureLine(out)
			n.note("warrenctl %s: %v: %s", strings.Join(s, " "), err, failureLine(out))
		} else {
			n.note("warrenctl %s: ok", strings.Join(s, " "))
		}
		n.opLog = append(n.opLog, rec)
	}
}

// failureLine is the line of a failed command's output that says why: the
// first that reports an error (a table's row), else the first.
func failureLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "error") {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return firstLine(s)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
