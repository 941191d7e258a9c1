// Command jepsen is Warren's chaos harness: it starts a cluster of real
// warren processes, runs producers with confirms and consumers with manual
// acks against every node, breaks the cluster on a schedule (killed and
// paused processes, graceful stops, links cut with nftables, operators'
// leadership and membership commands), heals it, drains the queues and
// checks what the clients saw: no confirmed message lost, none delivered
// that was never published or from another queue, none delivered again
// after an ack the broker read, and every other repeated delivery flagged
// redelivered. It exits 1 when the history shows a defect, 2 when it could
// not observe everything it checks. `jepsen check RUN_DIR` judges a run's
// history again, offline.
//
//	go run ./jepsen --duration 2m --faults kill,pause,partition --ops rebalance,drain
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// config is one run's settings.
type config struct {
	warren, warrenctl string
	dir               string
	nodes             int
	queues            int
	sleepy            int
	single            int
	// deadLetter is the number of queue pairs that dead-letter
	// (workload.expiring and workload.dead).
	deadLetter  int
	rate        int
	rpcRate     int
	duration    time.Duration
	hold        time.Duration
	faults, ops []string
	seed        uint64
	drainLimit  time.Duration
	// extra are more flags for every node.
	extra []string
	// upgradeFrom, when set, is an older build's warren binary: the
	// cluster starts on it and the nemesis upgrades the nodes to warren
	// one at a time while the clients run (upgrade.go).
	upgradeFrom string
}

func main() {
	os.Exit(mainExit(os.Args[1:]))
}

func mainExit(args []string) int {
	if len(args) > 0 && args[0] == "check" {
		return checkExit(args[1:], os.Stdout, os.Stderr)
	}
	fs := flag.NewFlagSet("jepsen", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: jepsen [flags]
       jepsen check RUN_DIR   (judge a run's history.jsonl again, offline)

Starts a Warren cluster of real processes, runs clients against every node
while breaking the cluster, then checks that no confirmed message was lost,
none was invented and every repeated delivery was flagged redelivered.
Exit status: 0 the history is correct, 1 it shows a defect, 2 the run could
not be made (bad flags, the cluster did not start) or could not observe
everything it checks (the verdict says what).

Flags:
`)
		fs.PrintDefaults()
	}
	var cfg config
	var faults, ops, extra string
	fs.StringVar(&cfg.warren, "warren", "bin/warren", "the warren binary")
	fs.StringVar(&cfg.warrenctl, "warrenctl", "bin/warrenctl", "the warrenctl binary (for the operations)")
	fs.StringVar(&cfg.dir, "dir", "", "directory for the nodes' data and logs and the report (default: a new one under the system's temporary directory)")
	fs.IntVar(&cfg.nodes, "nodes", 3, "cluster size (3 or 5)")
	fs.IntVar(&cfg.queues, "queues", 3, "quorum queues the clients use")
	fs.IntVar(&cfg.sleepy, "sleepy-queues", 2, "more quorum queues used in bursts: every 7-12 s each node publishes a few messages with confirms to one of them, then empties them all with basic.get, so that between bursts they hibernate (--queue-hibernate-after, 5s by default) and each burst wakes them")
	fs.IntVar(&cfg.single, "single-active-queues", 1, "more quorum queues with a single active consumer (x-single-active-consumer, x-consumer-disconnected-timeout 5 s): produced to and consumed like the others, a consumer on every node and one active; a fault on the active one's node suspends it, and the next takes over after the timeout")
	fs.IntVar(&cfg.deadLetter, "dead-letter-queues", 1, "pairs of quorum queues that dead-letter: the producers publish to the first of each too, whose messages expire after 200 ms with nobody consuming it and are dead-lettered at-least-once to the second, which the consumers empty")
	fs.IntVar(&cfg.rate, "rate", 100, "messages per second each node's producer publishes")
	fs.IntVar(&cfg.rpcRate, "rpc-rate", 10, "requests per second each node's RPC client sends: RabbitMQ's request/reply, a client with an exclusive reply queue on its node, requests in the quorum queue "+rpcQueue+" answered by a server on every node, replies published with confirms to the reply queue wherever it lives; 0 for none")
	fs.DurationVar(&cfg.duration, "duration", time.Minute, "how long the clients run and the nemesis breaks things")
	fs.DurationVar(&cfg.hold, "hold", 8*time.Second, "longest a fault is held (and a pause between faults); each lasts between half this and this")
	fs.StringVar(&faults, "faults", "kill,stop,pause,partition,alarm", "faults, comma-separated: kill, stop, pause, partition, alarm (a disk alarm on the node: warrenctl set disk-free-limit above its free space, which blocks publishers on every node, then back to 50MB), halves, ring, bridge, oneway, loss, kill-minority, kill-all, lose-unsynced (see jepsen/README.md; partition, halves, ring, bridge, oneway and loss need root, ip, nft and iptables); empty for none")
	fs.StringVar(&ops, "ops", "rebalance,transfer,drain,member,checkpoint", "operator commands between faults, comma-separated: rebalance, transfer, drain, member, checkpoint; empty for none")
	fs.Uint64Var(&cfg.seed, "seed", uint64(time.Now().UnixNano()), "seed of the nemesis's choices (printed, to repeat a schedule)")
	fs.DurationVar(&cfg.drainLimit, "drain-limit", 2*time.Minute, "longest the consumers may take to empty the queues after the healing")
	fs.StringVar(&extra, "node-flags", "", "more flags for every node, space-separated (e.g. \"--queue-raft-timeout 5s\")")
	fs.StringVar(&cfg.upgradeFrom, "upgrade-from", "", "an older build's warren `binary`: the cluster starts on it, and in the first rounds the nemesis stops one node after another gracefully and starts it on --warren (a rolling upgrade, under the faults and operations); afterwards every queue member must run the newest queue machine version")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg.faults, cfg.ops, cfg.extra = split(faults, ","), split(ops, ","), strings.Fields(extra)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// Ctrl-C ends the run early, still stopping the nodes and removing
	// the namespaces.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	v, err := run(ctx, log, cfg)
	if err != nil {
		log.Error("run failed", "err", err)
		return 2
	}
	fmt.Println(v)
	return exitStatus(v)
}

// exitStatus is the exit status for a verdict: 1 for a defect, 2 when
// there is none but the run could not observe everything, else 0.
func exitStatus(v verdict) int {
	switch {
	case v.defective():
		return 1
	case !v.ok():
		return 2
	}
	return 0
}

func split(s, sep string) []string {
	var out []string
	for _, f := range strings.Split(s, sep) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// report is what a run writes to report.json beside the nodes' logs.
type report struct {
	Seed   uint64   `json:"seed"`
	Nodes  int      `json:"nodes"`
	Faults []string `json:"faults"`
	Ops    []string `json:"ops"`
	Events []string `json:"events"`
	// FaultLog is every fault with its kind, nodes, shape, start and
	// end; FaultCounts how many of each kind were applied.
	FaultLog    []faultRecord  `json:"fault_log"`
	FaultCounts map[string]int `json:"fault_counts"`
	Verdict     verdict        `json:"verdict"`
	// Queues, Replicas and Consumers are warrenctl's list queues, quorum
	// status and quorum consumers after the drain: a stranded message's
	// consumer record (its ID, which debug logs name) is in Consumers.
	Queues    []string `json:"queues"`
	Replicas  []string `json:"replicas"`
	Consumers []string `json:"consumers"`
}

// run makes one run: cluster up, clients and nemesis for the duration,
// heal, drain, check, cluster down.
func run(ctx context.Context, log *slog.Logger, cfg config) (verdict, error) {
	bins := []*string{&cfg.warren, &cfg.warrenctl}
	if cfg.upgradeFrom != "" {
		bins = append(bins, &cfg.upgradeFrom)
	}
	for _, bin := range bins {
		abs, err := filepath.Abs(*bin)
		if err != nil {
			return verdict{}, err
		}
		if _, err := os.Stat(abs); err != nil {
			return verdict{}, fmt.Errorf("%w (make build makes it)", err)
		}
		*bin = abs
	}
	if cfg.dir == "" {
		d, err := os.MkdirTemp("", "warren-jepsen-")
		if err != nil {
			return verdict{}, err
		}
		cfg.dir = d
	}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return verdict{}, err
	}
	log.Info("run", "dir", cfg.dir, "seed", cfg.seed, "nodes", cfg.nodes, "faults", cfg.faults, "ops", cfg.ops, "duration", cfg.duration)

	var l *lab
	if i := slices.IndexFunc(cfg.faults, needsLab); i >= 0 {
		if why := labAvailable(); why != "" {
			return verdict{}, fmt.Errorf("the %s fault: %s", cfg.faults[i], why)
		}
		var err error
		if l, err = newLab(cfg.nodes, os.Getpid()%200); err != nil {
			return verdict{}, fmt.Errorf("network namespaces: %w", err)
		}
		defer l.close()
	}
	first := cfg.warren
	if cfg.upgradeFrom != "" {
		first = cfg.upgradeFrom
	}
	var dk *disks
	if slices.Contains(cfg.faults, "lose-unsynced") {
		var err error
		if dk, err = mountDisks(cfg.dir, cfg.nodes); err != nil {
			return verdict{}, err
		}
		defer dk.close()
	}
	c, err := startCluster(log, first, cfg.warrenctl, cfg.dir, cfg.nodes, l, cfg.extra)
	if err != nil {
		return verdict{}, err
	}
	c.disks = dk
	defer c.stopAll()

	w := &workload{log: log, rate: cfg.rate, rpcRate: cfg.rpcRate, rpc: newRPCHistory()}
	for i := 0; i < cfg.queues; i++ {
		w.queues = append(w.queues, fmt.Sprintf("jepsen-%d", i))
	}
	for i := 0; i < cfg.deadLetter; i++ {
		w.expiring = append(w.expiring, fmt.Sprintf("jepsen-expiring-%d", i))
		w.dead = append(w.dead, fmt.Sprintf("jepsen-dead-%d", i))
	}
	deadLetterTo := map[string]string{}
	for i, q := range w.expiring {
		deadLetterTo[q] = w.dead[i]
	}
	w.h = newHistory(deadLetterTo)
	for i := 0; i < cfg.single; i++ {
		w.single = append(w.single, fmt.Sprintf("jepsen-single-%d", i))
	}
	for i := 0; i < cfg.sleepy; i++ {
		w.sleepy = append(w.sleepy, fmt.Sprintf("jepsen-sleepy-%d", i))
	}
	declareCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = w.declare(declareCtx, c)
	cancel()
	if err != nil {
		return verdict{}, err
	}
	n, err := newNemesis(log, c, w, cfg.warrenctl, cfg.seed, cfg.hold, cfg.faults, cfg.ops)
	if err != nil {
		return verdict{}, err
	}
	if cfg.upgradeFrom != "" {
		n.upgradeTo = cfg.warren
	}

	// Consumers run until the queues are drained, producers and the
	// nemesis for the duration.
	consumeCtx, stopConsumers := context.WithCancel(ctx)
	var consumers, producers sync.WaitGroup
	runCtx, stop := context.WithTimeout(ctx, cfg.duration)
	defer stop()
	for i, nd := range c.nodes {
		consumers.Add(1)
		go func() { defer consumers.Done(); w.consume(consumeCtx, nd) }()
		if len(w.sleepy) > 0 {
			consumers.Add(1)
			go func() { defer consumers.Done(); w.bursts(runCtx, consumeCtx, nd, cfg.seed+uint64(i)) }()
		}
	}
	for _, nd := range c.nodes {
		producers.Add(1)
		go func() { defer producers.Done(); w.produce(runCtx, nd) }()
		if w.rpcRate > 0 {
			// RPC clients send for the duration and take replies until
			// the drain is over; servers answer until then.
			consumers.Add(2)
			go func() { defer consumers.Done(); w.rpcClientLoop(runCtx, consumeCtx, nd) }()
			go func() { defer consumers.Done(); w.rpcServerLoop(consumeCtx, nd) }()
		}
	}
	n.run(runCtx)
	producers.Wait()
	if len(n.faults) > 0 {
		n.note("faults applied: %s", n.countLine())
	}

	n.note("healing everything")
	if err := c.heal(); err != nil {
		stopConsumers()
		consumers.Wait()
		return verdict{}, fmt.Errorf("heal the cluster: %w", err)
	}
	drainErr := drain(ctx, c, w, cfg.drainLimit)
	stopConsumers()
	consumers.Wait()
	if drainErr != nil {
		n.note("drain: %v", drainErr)
		// Messages still in a queue would read as lost: say why instead.
		w.h.unobservable("every message: %v", drainErr)
	}

	n.note("publishing through every node to every queue, %d rounds %s apart", afterwardsRounds, afterwardsPause)
	refusedAfter, why := w.afterwards(ctx, c)
	for _, line := range why {
		n.note("afterwards: %s", line)
	}

	// The cluster's own account of the queues, for the post-mortem, once
	// the consumers' last settlements are in: with every consumer gone,
	// a message still unacknowledged after that is stranded.
	listing, stranded, listErr := settledListing(ctx, c, cfg.warrenctl, 10*time.Second)
	if listErr != nil {
		n.note("list queues: %v", listErr)
		w.h.unobservable("the stranded messages: %v", listErr)
	}
	if stranded > 0 {
		n.note("%d messages still unacknowledged in queues without consumers", stranded)
	}
	v := w.h.check()
	if w.rpcRate > 0 {
		rv := w.rpc.check()
		v.RPC = &rv
	}
	v.Stranded = stranded
	v.RefusedAfterHeal = refusedAfter
	v.Crashed = c.crashed()
	if cfg.upgradeFrom != "" {
		v.Upgrade = &upgradeVerdict{Upgraded: n.upgraded, nodes: cfg.nodes}
		var upgraded []string
		for _, nd := range c.nodes[:n.upgraded] {
			upgraded = append(upgraded, nd.name)
		}
		v.Upgrade.Behind, v.Upgrade.Machine = machinesBehind(ctx, c, cfg.warrenctl, upgraded, w.all())
		for _, b := range v.Upgrade.Behind {
			n.note("after the upgrade: %s", b)
		}
	}
	rep := report{Seed: cfg.seed, Nodes: cfg.nodes, Faults: cfg.faults, Ops: cfg.ops, Events: n.events, FaultLog: n.records, FaultCounts: n.counts, Verdict: v, Queues: listing}
	for _, q := range w.all() {
		if out, err := c.ctl(ctx, cfg.warrenctl, "quorum", "status", q); err == nil {
			rep.Replicas = append(rep.Replicas, strings.Split(out, "\n")...)
		}
		if out, err := c.ctl(ctx, cfg.warrenctl, "quorum", "consumers", q); err == nil {
			rep.Consumers = append(rep.Consumers, strings.Split(out, "\n")...)
		}
	}
	if b, err := json.MarshalIndent(rep, "", "  "); err == nil {
		os.WriteFile(filepath.Join(cfg.dir, "report.json"), b, 0o644)
	}
	if err := writeHistoryFile(filepath.Join(cfg.dir, historyFile), w.h, factsOf(v, cfg.nodes)); err != nil {
		log.Warn("write the history", "err", err)
	}
	if f, err := os.Create(filepath.Join(cfg.dir, "history.tsv")); err == nil {
		if err := w.h.writeTSV(f); err != nil {
			log.Warn("write the history", "err", err)
		}
		f.Close()
	}
	log.Info("done", "report", filepath.Join(cfg.dir, "report.json"), "ok", v.ok())
	return v, nil
}

// drain waits until every queue is empty as each node reports it and no
// delivery has come for a few seconds.
func drain(ctx context.Context, c *cluster, w *workload, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, quietSince := -1, time.Now()
	for time.Now().Before(deadline) {
		n := w.h.deliveredCount()
		if n != last {
			last, quietSince = n, time.Now()
		}
		empty := true
		for _, nd := range c.nodes {
			ready, err := w.ready(nd)
			if err != nil || ready > 0 {
				empty = false
				break
			}
		}
		// Dead letters come later than the rest: a message expires, then
		// its queue's leader publishes it to the dead-letter queue,
		// trying again every second until that is confirmed.
		if empty && w.h.awaitingDeadLetters() > 0 {
			empty = false
		}
		// A reply may still be on its way to a client that kept its
		// connection.
		if empty && w.rpcRate > 0 && w.rpc.awaiting() > 0 {
			empty = false
		}
		if empty && time.Since(quietSince) > 3*time.Second {
			return nil
		}
		sleep(ctx, 500*time.Millisecond)
	}
	return fmt.Errorf("the queues were not drained within %s", limit)
}

// settledListing is warrenctl's list of queues once no queue without
// consumers holds unacknowledged messages, or after wait; stranded counts
// those left then. err says why the last listing could not be read: then
// stranded is unknown, not zero.
func settledListing(ctx context.Context, c *cluster, warrenctl string, wait time.Duration) (lines []string, stranded int, err error) {
	deadline := time.Now().Add(wait)
	for {
		var out string
		out, err = c.ctl(ctx, warrenctl, "list", "queues")
		if err == nil {
			lines = strings.Split(out, "\n")
			stranded, err = unackedWithoutConsumers(lines)
		}
		if (err == nil && stranded == 0) || time.Now().After(deadline) {
			return lines, stranded, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// unackedWithoutConsumers adds up the UNACKED column of the queues whose
// CONSUMERS column is 0 in warrenctl's list of queues; a listing without
// those columns, or with a row it cannot read, is an error.
func unackedWithoutConsumers(lines []string) (int, error) {
	if len(lines) == 0 {
		return 0, errors.New("an empty listing")
	}
	head := strings.Fields(lines[0])
	unacked, consumers := slices.Index(head, "UNACKED"), slices.Index(head, "CONSUMERS")
	if unacked < 0 || consumers < 0 {
		return 0, fmt.Errorf("no UNACKED and CONSUMERS columns in %q", lines[0])
	}
	total := 0
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if len(f) <= max(unacked, consumers) {
			return 0, fmt.Errorf("a row without its UNACKED or CONSUMERS column: %q", l)
		}
		if f[consumers] != "0" {
			continue
		}
		n, err := strconv.Atoi(f[unacked])
		if err != nil {
			return 0, fmt.Errorf("UNACKED %q: %w", f[unacked], err)
		}
		total += n
	}
	return total, nil
}
