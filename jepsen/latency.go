package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// The latency fault slows every link between nodes without touching
// clients or gossip. This kernel has no netem, so the delay is added in
// user space: the harness runs a delayProxy for every ordered pair of
// nodes on the bridge's address, and nftables in each node's namespace
// (nat output hook) sends the node's new connections to another node's
// internal port to the proxy for that pair. The node's established direct
// connections are reset (a filter rule rejects their packets with a TCP
// reset for as long as the fault lasts), so its gRPC clients dial again,
// through the proxy. Neither side can tell: the client still dials the
// peer's address, so the peer's certificate matches, and nodes prove
// themselves by certificate, never by source address
// (cluster/rpc/security.go). Healing removes the rules, then closes the
// proxies, which ends the delayed connections; the nodes dial again,
// directly.

// latencyTable is the nftables table the fault adds to each namespace.
const latencyTable = "latency"

// latencyPlan is the delay the fault adds, each way: base ± jitter, per
// chunk forwarded.
type latencyPlan struct {
	base, jitter time.Duration
}

// planLatency picks a one-way delay of 50-200 ms, with jitter a quarter
// of it.
func planLatency(rng *rand.Rand) latencyPlan {
	base := time.Duration(50+rng.IntN(151)) * time.Millisecond
	return latencyPlan{base: base, jitter: (base / 4).Round(time.Millisecond)}
}

func (p latencyPlan) String() string {
	return fmt.Sprintf("%s ±%s each way", p.base, p.jitter)
}

// latencyRules are the nft commands (arguments after "nft") for node i:
// a connection it opens to another node's internal address goes to that
// pair's proxy instead, and packets of a connection still going straight
// there are answered with a reset. The filter runs after the nat hook, so
// it sees the redirected connections' new destination and leaves them be.
func latencyRules(internal []string, i int, proxies map[int]string) ([][]string, error) {
	cmds := [][]string{
		{"add", "table", "ip", latencyTable},
		{"add", "chain", "ip", latencyTable, "toproxy", "{ type nat hook output priority -100; }"},
		{"add", "chain", "ip", latencyTable, "direct", "{ type filter hook output priority 0; }"},
	}
	var direct []string
	for j, addr := range internal {
		if j == i {
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("node %d's internal address %q: %w", j, addr, err)
		}
		proxy, ok := proxies[j]
		if !ok {
			return nil, fmt.Errorf("no proxy from node %d to node %d", i, j)
		}
		cmds = append(cmds, []string{"add", "rule", "ip", latencyTable, "toproxy",
			"ip", "daddr", host, "tcp", "dport", port, "dnat", "to", proxy})
		direct = append(direct, host+" . "+port)
	}
	if len(direct) > 0 {
		cmds = append(cmds, []string{"add", "rule", "ip", latencyTable, "direct",
			"ip", "daddr", ".", "tcp", "dport", "{ " + strings.Join(direct, ", ") + " }", "reject", "with", "tcp", "reset"})
	}
	return cmds, nil
}

// latencyFault is one latency fault in force: its proxies, by (from, to).
type latencyFault struct {
	n       *nemesis
	plan    latencyPlan
	proxies map[[2]int]*delayProxy
	start   time.Time
}

// latency applies the fault between every two nodes.
func (n *nemesis) latency(context.Context) ([]int, string, func() error, error) {
	c := n.c
	f := &latencyFault{n: n, plan: planLatency(n.rng), proxies: map[[2]int]*delayProxy{}, start: time.Now()}
	seed := n.rng.Uint64()
	all := make([]int, len(c.nodes))
	for i := range all {
		all[i] = i
	}
	shape := fmt.Sprintf("%s between every two nodes", f.plan)
	return all, shape, f.heal, f.apply(seed)
}

// apply starts the proxies and puts the rules into every namespace; on an
// error it undoes what it did.
func (f *latencyFault) apply(seed uint64) error {
	c := f.n.c
	var internal []string
	for _, nd := range c.nodes {
		internal = append(internal, nd.internal)
	}
	for i := range c.nodes {
		for j, nd := range c.nodes {
			if i == j {
				continue
			}
			p, err := startDelayProxy(c.lab.subnet+".254:0", nd.internal, f.plan.base, f.plan.jitter, seed+uint64(i*len(c.nodes)+j))
			if err != nil {
				f.teardown()
				return fmt.Errorf("proxy from %s to %s: %w", c.nodes[i].name, nd.name, err)
			}
			f.proxies[[2]int{i, j}] = p
		}
	}
	for i := range c.nodes {
		to := map[int]string{}
		for j := range c.nodes {
			if p := f.proxies[[2]int{i, j}]; p != nil {
				to[j] = p.addr()
			}
		}
		cmds, err := latencyRules(internal, i, to)
		if err == nil {
			for _, cmd := range cmds {
				if err = sh(append([]string{"ip", "netns", "exec", c.lab.ns[i], "nft"}, cmd...)...); err != nil {
					break
				}
			}
		}
		if err != nil {
			f.teardown()
			return err
		}
	}
	return nil
}

// teardown removes the rules, then closes the proxies: the connections
// through them end, and the nodes dial again, directly. It returns an
// error if a namespace still holds the rules afterwards.
func (f *latencyFault) teardown() error {
	var left []string
	for _, ns := range f.n.c.lab.ns {
		exec.Command("ip", "netns", "exec", ns, "nft", "delete", "table", "ip", latencyTable).Run()
		if exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "ip", latencyTable).Run() == nil {
			left = append(left, ns)
		}
	}
	for _, p := range f.proxies {
		p.close()
	}
	if len(left) > 0 {
		return fmt.Errorf("the latency rules are still in %s", strings.Join(left, ", "))
	}
	return nil
}

// heal measures what the fault did, for the schedule, then tears it
// down. A fault no node connection went through added no latency: that
// is the heal's error.
func (f *latencyFault) heal() error {
	var conns, bytes int64
	for _, p := range f.proxies {
		conns += p.accepted.Load()
		bytes += p.forwarded.Load()
	}
	end := time.Now()
	f.n.note("latency %s: %d node connections through the proxies, %d KiB forwarded; %s; %s",
		f.plan, conns, bytes>>10, f.handshakes(), f.confirmWaits(end))
	err := f.teardown()
	if conns == 0 {
		err = errors.Join(err, errors.New("no node connection went through the proxies"))
	}
	return err
}

// handshakes times a TLS handshake with the second node's internal port
// through the first node's proxy to it and directly: a handshake is one
// round trip, so through the proxy it takes at least twice the delay.
func (f *latencyFault) handshakes() string {
	c := f.n.c
	p := f.proxies[[2]int{0, 1}]
	if p == nil {
		return "no proxy to time a handshake through"
	}
	roots := x509.NewCertPool()
	if ca, err := os.ReadFile(flagValue(c.ctlAuth, "--ca")); err == nil {
		roots.AppendCertsFromPEM(ca)
	}
	host, _, _ := net.SplitHostPort(c.nodes[1].internal)
	conf := &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS13}
	via, err := handshakeTime(p.addr(), conf)
	if err != nil {
		return fmt.Sprintf("TLS handshake with %s through the proxy: %v", c.nodes[1].name, err)
	}
	direct, err := handshakeTime(c.nodes[1].internal, conf)
	if err != nil {
		return fmt.Sprintf("TLS handshake with %s directly: %v", c.nodes[1].name, err)
	}
	return fmt.Sprintf("TLS handshake with %s through the proxy %s, directly %s", c.nodes[1].name, via.Round(time.Millisecond), direct.Round(time.Millisecond))
}

// handshakeTime is the quickest of three TLS handshakes with addr.
func handshakeTime(addr string, conf *tls.Config) (time.Duration, error) {
	best := time.Duration(0)
	for range 3 {
		start := time.Now()
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
		if err != nil {
			return 0, err
		}
		d := time.Since(start)
		conn.Close()
		if best == 0 || d < best {
			best = d
		}
	}
	return best, nil
}

// confirmWaits compares the median confirm wait of the publishes made
// during the fault with that of those made in as long a span before it.
func (f *latencyFault) confirmWaits(end time.Time) string {
	h := f.n.w.h
	if h == nil {
		return "no history"
	}
	during, nd := h.confirmWaitMedian(f.start, end)
	before, nb := h.confirmWaitMedian(f.start.Add(-end.Sub(f.start)), f.start)
	return fmt.Sprintf("confirm wait p50 %s over %d publishes, %s over %d in as long before",
		during.Round(time.Millisecond), nd, before.Round(time.Millisecond), nb)
}

// confirmWaitMedian is the median wait of the confirmed publishes made in
// [from, to), and how many there were.
func (h *history) confirmWaitMedian(from, to time.Time) (time.Duration, int) {
	h.mu.Lock()
	var waits []time.Duration
	for _, r := range h.msgs {
		if !r.confirmed.IsZero() && !r.published.Before(from) && r.published.Before(to) {
			waits = append(waits, r.confirmed.Sub(r.published))
		}
	}
	h.mu.Unlock()
	if len(waits) == 0 {
		return 0, 0
	}
	slices.Sort(waits)
	return waits[len(waits)/2], len(waits)
}

// flagValue is the value after name in args, or "".
func flagValue(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}
