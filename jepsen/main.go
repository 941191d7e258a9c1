// Command jepsen is Warren's chaos harness: it starts a cluster of real
// warren processes, runs producers with confirms and consumers with manual
// acks against every node, breaks the cluster on a schedule (killed and
// paused processes, graceful stops, links cut with nftables, operators'
// leadership and membership commands), heals it, drains the queues and
// checks what the clients saw: no confirmed message lost, none delivered
// that was never published, from another queue, with other content than
// published or out of the order a single active consumer promises, none
// delivered again after an ack the broker read, and every other repeated
// delivery flagged redelivered. It exits 1 when the history shows a
// defect, 2 when it could not observe everything it checks. `jepsen check
// RUN_DIR` judges a run's history again, offline.
//
//	go run ./jepsen --duration 2m --faults kill,pause,partition --ops rebalance,drain
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
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
	// ordered are single active consumer queues with one producer each,
	// large queues of multi-frame bodies (order.go, large.go).
	ordered, large int
	// crashEvery is about how often each node's crashing consumer drops
	// its connection (crash.go); 0 for none.
	crashEvery time.Duration
	// minFaults is the fewest faults a run must apply; -1 derives it
	// from the duration and hold (defaultMinFaults).
	minFaults int
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
	// everyFault makes a fault of faults never applied something the
	// run could not observe, which fails it (the smoke run's promise).
	everyFault bool
	// upgradeFrom, when set, is an older build's warren binary: the
	// cluster starts on it and the nemesis upgrades the nodes to warren
	// one at a time while the clients run (upgrade.go).
	upgradeFrom string
	// flags are every flag's value as the run was given it, for the
	// report; live is the terminal's status line, nil to log the
	// progress instead (progress.go).
	flags map[string]string
	live  *liveLine
}

func main() {
	os.Exit(mainExit(os.Args[1:]))
}

func mainExit(args []string) int {
	if len(args) > 0 && args[0] == "check" {
		return checkExit(args[1:], os.Stdout, os.Stderr)
	}
	if len(args) > 0 && args[0] == "report" {
		return reportExit(args[1:], os.Stdout, os.Stderr)
	}
	fs := flag.NewFlagSet("jepsen", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: jepsen [flags]
       jepsen check RUN_DIR   (judge a run's history.jsonl again, offline)
       jepsen report RUN_DIR  (write a run's index.html again, offline)

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
	fs.StringVar(&cfg.dir, "dir", "", "directory for the nodes' data and logs and the report (default: results/TIME under the working directory)")
	fs.IntVar(&cfg.nodes, "nodes", 3, "cluster size (3 or 5)")
	fs.IntVar(&cfg.queues, "queues", 3, "quorum queues the clients use")
	fs.IntVar(&cfg.sleepy, "sleepy-queues", 2, "more quorum queues used in bursts: every 7-12 s each node publishes a few messages with confirms to one of them, then empties them all with basic.get, so that between bursts they hibernate (--queue-hibernate-after, 5s by default) and each burst wakes them")
	fs.IntVar(&cfg.single, "single-active-queues", 1, "more quorum queues with a single active consumer (x-single-active-consumer, x-consumer-disconnected-timeout 5 s): produced to and consumed like the others, a consumer on every node and one active; a fault on the active one's node suspends it, and the next takes over after the timeout")
	fs.IntVar(&cfg.ordered, "ordered-queues", 1, "more single active consumer queues, each with one producer: first deliveries (not flagged redelivered) must come in publish order")
	fs.IntVar(&cfg.large, "large-queues", 1, "more quorum queues whose bodies (10-60 KB, frame_max 4096) span several frames, with a SHA-256 and headers of every AMQP field type, checked byte for byte on delivery")
	fs.DurationVar(&cfg.crashEvery, "crash-every", 2*time.Second, "about how often each node's crashing consumer takes a few deliveries, acks some, and drops its TCP connection holding the rest (which must come back flagged redelivered); 0 for none")
	fs.IntVar(&cfg.minFaults, "min-faults", -1, "fewest faults a run must apply, else it fails as not observed; -1 for duration/(4*hold), at least 1 (0 with no faults)")
	fs.IntVar(&cfg.deadLetter, "dead-letter-queues", 1, "pairs of quorum queues that dead-letter: the producers publish to the first of each too, whose messages expire after 200 ms with nobody consuming it and are dead-lettered at-least-once to the second, which the consumers empty")
	fs.IntVar(&cfg.rate, "rate", 100, "messages per second each node's producer publishes")
	fs.IntVar(&cfg.rpcRate, "rpc-rate", 10, "requests per second each node's RPC client sends: RabbitMQ's request/reply, a client with an exclusive reply queue on its node, requests in the quorum queue "+rpcQueue+" answered by a server on every node, replies published with confirms to the reply queue wherever it lives; 0 for none")
	fs.DurationVar(&cfg.duration, "duration", time.Minute, "how long the clients run and the nemesis breaks things")
	fs.DurationVar(&cfg.hold, "hold", 8*time.Second, "longest a fault is held (and a pause between faults); each lasts between half this and this")
	fs.StringVar(&faults, "faults", "kill,stop,pause,partition,alarm", "faults, comma-separated: kill, stop, pause, partition, alarm (a disk alarm on the node: warrenctl set disk-free-limit above its free space, which blocks publishers on every node, then back to 50MB), halves, ring, bridge, oneway, loss, kill-minority, kill-all, latency (every link between nodes delayed 50-200 ms each way), full-disk (one node's data directory, a small tmpfs, filled), lose-unsynced (unsynced writes of a killed node dropped) (see jepsen/README.md; partition, halves, ring, bridge, oneway, loss and latency need root, ip, nft and iptables; full-disk and lose-unsynced need root); empty for none")
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
	cfg.flags = map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { cfg.flags[f.Name] = f.Value.String() })
	if cfg.live = newLiveLine(os.Stderr); !cfg.live.tty {
		cfg.live = nil
	}
	var logOut io.Writer = os.Stderr
	if cfg.live != nil {
		logOut = cfg.live
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
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
	// Flags are the run's flags, every one with its value; Began and
	// Stopped when the clients started and the producers stopped; OpLog
	// every operator command as it happened. The report page shows them.
	Flags   map[string]string `json:"flags,omitempty"`
	Began   time.Time         `json:"began,omitzero"`
	Stopped time.Time         `json:"producers_stopped,omitzero"`
	OpLog   []opRecord        `json:"op_log,omitempty"`
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
		d, err := filepath.Abs(filepath.Join("results", time.Now().UTC().Format("20060102-150405")))
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
	unmount, err := prepareSmallDisk(cfg) // fulldisk.go
	if err != nil {
		return verdict{}, fmt.Errorf("the full-disk fault: %w", err)
	}
	defer unmount()
	var dk *disks
	if slices.Contains(cfg.faults, "lose-unsynced") {
		if slices.Contains(cfg.faults, "full-disk") {
			return verdict{}, errors.New("the lose-unsynced and full-disk faults both mount a node's data directory: choose one")
		}
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
	for i := 0; i < cfg.ordered; i++ {
		w.ordered = append(w.ordered, fmt.Sprintf("jepsen-ordered-%d", i))
	}
	for i := 0; i < cfg.large; i++ {
		w.large = append(w.large, fmt.Sprintf("jepsen-large-%d", i))
	}
	w.h.expect = w.expectations(cfg.crashEvery > 0)
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
	began := time.Now()
	runCtx, stop := context.WithTimeout(ctx, cfg.duration)
	defer stop()
	// Leadership is sampled and progress shown until the report is
	// written.
	watchCtx, stopWatching := context.WithCancel(ctx)
	var watching sync.WaitGroup
	defer watching.Wait()
	defer stopWatching()
	if lw, err := newLeaderWatch(c); err != nil {
		log.Warn("leadership not sampled", "err", err)
	} else {
		defer lw.close()
		watching.Go(func() { lw.run(watchCtx, w.h) })
	}
	watching.Go(func() { showProgress(watchCtx, cfg.live, log, began, cfg.duration, c, w, n) })
	for i, nd := range c.nodes {
		consumers.Add(1)
		go func() { defer consumers.Done(); w.consume(consumeCtx, nd) }()
		if len(w.sleepy) > 0 {
			consumers.Add(1)
			go func() { defer consumers.Done(); w.bursts(runCtx, consumeCtx, nd, cfg.seed+uint64(i)) }()
		}
	}
	for i, nd := range c.nodes {
		producers.Add(1)
		go func() { defer producers.Done(); w.produce(runCtx, nd, w.producedBy(i, len(c.nodes))) }()
		if cfg.crashEvery > 0 {
			producers.Add(1)
			go func() { defer producers.Done(); w.crashing(runCtx, nd, cfg.crashEvery, cfg.seed+uint64(100+i)) }()
		}
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
	stopped := time.Now()
	if len(n.faults) > 0 {
		n.note("faults applied: %s", n.countLine())
	}
	for _, f := range unapplied(cfg.faults, n.counts) {
		if cfg.everyFault {
			w.h.unobservable("the %s fault: never applied (the run ended first, or it failed each time)", f)
		} else {
			n.note("the %s fault was never applied", f)
		}
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
	f := facts{StrandedByQueue: stranded, RefusedAfterHeal: refusedAfter, Crashed: c.crashed(), Nodes: cfg.nodes,
		Faults: faultOutcomes(n.records), MinFaults: cfg.minFaults}
	if f.MinFaults < 0 {
		f.MinFaults = defaultMinFaults(cfg.duration, cfg.hold, len(cfg.faults))
	}
	if drainErr != nil {
		f.DrainError = drainErr.Error()
	}
	if listErr != nil {
		n.note("list queues: %v", listErr)
		f.ListingError = listErr.Error()
	}
	for q, k := range stranded {
		f.Stranded += k
		if k > 0 {
			n.note("%d messages still unacknowledged in %s without consumers", k, q)
		}
	}
	if w.rpcRate > 0 {
		rv := w.rpc.check()
		f.RPC = &rv
	}
	if cfg.upgradeFrom != "" {
		f.Upgrade = &upgradeVerdict{Upgraded: n.upgraded}
		var upgraded []string
		for _, nd := range c.nodes[:n.upgraded] {
			upgraded = append(upgraded, nd.name)
		}
		f.Upgrade.Behind, f.Upgrade.Machine = machinesBehind(ctx, c, cfg.warrenctl, upgraded, w.all())
		for _, b := range f.Upgrade.Behind {
			n.note("after the upgrade: %s", b)
		}
	}
	f.Crashes = crashStarts(n.records)
	w.h.crashes = f.Crashes
	v := w.h.check()
	f.apply(&v)
	rep := report{Seed: cfg.seed, Nodes: cfg.nodes, Faults: cfg.faults, Ops: cfg.ops, Events: n.events, FaultLog: n.records, FaultCounts: n.counts, Verdict: v, Queues: listing,
		Flags: cfg.flags, Began: began, Stopped: stopped, OpLog: n.opLog}
	for _, q := range w.all() {
		if out, err := c.ctl(ctx, cfg.warrenctl, "quorum", "status", q); err == nil {
			rep.Replicas = append(rep.Replicas, strings.Split(out, "\n")...)
		}
		if out, err := c.ctl(ctx, cfg.warrenctl, "quorum", "consumers", q); err == nil {
			rep.Consumers = append(rep.Consumers, strings.Split(out, "\n")...)
		}
	}
	stopWatching()
	watching.Wait()
	if b, err := json.MarshalIndent(rep, "", "  "); err == nil {
		os.WriteFile(filepath.Join(cfg.dir, "report.json"), b, 0o644)
	}
	if err := writeHistoryFile(filepath.Join(cfg.dir, historyFile), w.h, f); err != nil {
		log.Warn("write the history", "err", err)
	}
	if f, err := os.Create(filepath.Join(cfg.dir, "history.tsv")); err == nil {
		if err := w.h.writeTSV(f); err != nil {
			log.Warn("write the history", "err", err)
		}
		f.Close()
	}
	if err := writeReportPage(cfg.dir, rep, w.h, v); err != nil {
		log.Warn("write the report page", "err", err)
	}
	log.Info("done", "report", filepath.Join(cfg.dir, reportPage), "ok", v.ok())
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
// those left then, by queue. err says why the last listing could not be
// read: then stranded is unknown, not zero.
func settledListing(ctx context.Context, c *cluster, warrenctl string, wait time.Duration) (lines []string, stranded map[string]int, err error) {
	deadline := time.Now().Add(wait)
	for {
		var out string
		out, err = c.ctl(ctx, warrenctl, "list", "queues")
		if err == nil {
			lines = strings.Split(out, "\n")
			stranded, err = unackedWithoutConsumers(lines)
		}
		if (err == nil && len(stranded) == 0) || time.Now().After(deadline) {
			return lines, stranded, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// unackedWithoutConsumers is the UNACKED column, by NAME, of the queues
// whose CONSUMERS column is 0 and UNACKED is not, in warrenctl's list of
// queues; a listing without those columns, or with a row it cannot read,
// is an error.
func unackedWithoutConsumers(lines []string) (map[string]int, error) {
	if len(lines) == 0 {
		return nil, errors.New("an empty listing")
	}
	head := strings.Fields(lines[0])
	name, unacked, consumers := slices.Index(head, "NAME"), slices.Index(head, "UNACKED"), slices.Index(head, "CONSUMERS")
	if name < 0 || unacked < 0 || consumers < 0 {
		return nil, fmt.Errorf("no NAME, UNACKED and CONSUMERS columns in %q", lines[0])
	}
	stranded := map[string]int{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if len(f) <= max(name, unacked, consumers) {
			return nil, fmt.Errorf("a row without its NAME, UNACKED or CONSUMERS column: %q", l)
		}
		if f[consumers] != "0" {
			continue
		}
		n, err := strconv.Atoi(f[unacked])
		if err != nil {
			return nil, fmt.Errorf("UNACKED %q: %w", f[unacked], err)
		}
		if n > 0 {
			stranded[f[name]] += n
		}
	}
	return stranded, nil
}
