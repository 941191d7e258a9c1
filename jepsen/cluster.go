package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The harness's user: seeded by a config file on every node, because guest
// may only log in over loopback and nodes in namespaces are not.
const (
	user     = "jepsen"
	password = "jepsen"
)

// node is one warren process of the cluster under test. Its process is
// started, killed, stopped, paused and resumed by the nemesis; its data
// directory and log live under the run's directory for the post-mortem.
type node struct {
	name     string
	dir      string
	host     string // the address every port listens on
	ns       string // the network namespace it runs in, or ""
	amqp     string
	internal string
	gossip   string
	args     []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
	// ending: the harness asked the process to end (kill, stop). An
	// exit it did not ask for is a crash, recorded in crashes.
	ending  bool
	crashes []string
}

// cluster is the harness's nodes, and the namespaces they run in when the
// run can cut links.
type cluster struct {
	log   *slog.Logger
	nodes []*node
	lab   *lab // nil without partitions
	// ctlAuth are warrenctl's flags for the secured cluster: the CA and
	// the harness user's client certificate (secure.go).
	ctlAuth []string
	// disks are the nodes' data directories on lazyfs, for the
	// lose-unsynced fault (disks.go); nil without it.
	disks *disks
}

// startCluster starts n nodes that form a new cluster, each on its own
// address when lab is set, else on loopback with free ports, and waits
// until each takes logins.
func startCluster(log *slog.Logger, warren, warrenctl, dir string, n int, lab *lab, extra []string) (*cluster, error) {
	conf := filepath.Join(dir, "warren.toml")
	seed := fmt.Sprintf(`
[[users]]
name = %q
password = %q
tags = ["administrator"]
[[vhosts]]
name = "/"
[[permissions]]
user = %q
vhost = "/"
configure = ".*"
write = ".*"
read = ".*"
`, user, password, user)
	if err := os.WriteFile(conf, []byte(seed), 0o644); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	c := &cluster{log: log, lab: lab}
	var gossips []string
	for i := 0; i < n; i++ {
		nd := &node{name: fmt.Sprintf("warren-%d", i), dir: filepath.Join(dir, fmt.Sprintf("warren-%d", i))}
		if lab != nil {
			nd.host, nd.ns = lab.ips[i], lab.ns[i]
			nd.amqp, nd.internal, nd.gossip = nd.host+":5672", nd.host+":25672", nd.host+":7946"
		} else {
			nd.host = "127.0.0.1"
			ports, err := freePorts(3)
			if err != nil {
				return nil, err
			}
			nd.amqp = net.JoinHostPort(nd.host, strconv.Itoa(ports[0]))
			nd.internal = net.JoinHostPort(nd.host, strconv.Itoa(ports[1]))
			nd.gossip = net.JoinHostPort(nd.host, strconv.Itoa(ports[2]))
		}
		gossips = append(gossips, nd.gossip)
		c.nodes = append(c.nodes, nd)
	}
	secure, err := secureCluster(warrenctl, filepath.Join(dir, "certs"), c) // secure.go
	if err != nil {
		return nil, err
	}
	for i, nd := range c.nodes {
		nd.args = append([]string{warren,
			"--config", conf,
			"--node-name", nd.name,
			"--data-dir", filepath.Join(nd.dir, "data"),
			"--amqp", nd.amqp,
			"--internal-addr", nd.internal,
			"--gossip-addr", nd.gossip,
			"--join", strings.Join(gossips, ","),
			"--bootstrap-expect", strconv.Itoa(n),
		}, append(secure[i], extra...)...)
		if err := nd.start(); err != nil {
			c.stopAll()
			return nil, err
		}
	}
	for _, nd := range c.nodes {
		if err := nd.waitReady(90 * time.Second); err != nil {
			c.stopAll()
			return nil, err
		}
	}
	return c, nil
}

// freePorts finds n ports free now for TCP and UDP (gossip uses both),
// below the kernel's ephemeral range: a port the kernel handed out for
// ":0" can go to any outgoing connection's source before a node binds it
// (the process tests saw "address already in use" so).
func freePorts(n int) ([]int, error) {
	var ports []int
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for try := 0; len(ports) < n; try++ {
		if try == 1000 {
			return nil, errors.New("find a free port: none found")
		}
		port := 10000 + rand.IntN(22000) // below 32768, the usual ephemeral start
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		held = append(held, l) // held until all are found: no port twice
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue
		}
		held = append(held, pc)
		ports = append(ports, port)
	}
	return ports, nil
}

func (nd *node) uri() string {
	return fmt.Sprintf("amqp://%s:%s@%s/", user, password, nd.amqp)
}

// start runs the node's process, appending its output to its log file.
func (nd *node) start() error {
	if err := os.MkdirAll(nd.dir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(nd.dir, "warren.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s's log: %w", nd.name, err)
	}
	args := nd.args
	if nd.ns != "" {
		// ip netns exec execs the command, so the process (and the pid
		// signals go to) is warren's own.
		args = append([]string{"ip", "netns", "exec", nd.ns}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// A process group of its own: the kernel sends SIGHUP to a stopped
	// process whose group is orphaned, so a node paused by the nemesis
	// in the harness's group died when the shell that started the
	// harness exited (a run started in the background lost warren-2 that
	// way, silently, two seconds in).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	nd.mu.Lock()
	nd.ending = false
	nd.mu.Unlock()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", nd.name, err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		nd.mu.Lock()
		if !nd.ending {
			crash := fmt.Sprintf("%s exited at %s without being asked: %v", nd.name, time.Now().Format("15:04:05.000"), err)
			nd.crashes = append(nd.crashes, crash)
			fmt.Fprintf(logf, "jepsen: %s\n", crash)
		}
		nd.mu.Unlock()
		logf.Close()
		close(exited)
	}()
	nd.mu.Lock()
	nd.cmd, nd.exited, nd.paused = cmd, exited, false
	nd.mu.Unlock()
	return nil
}

// crashed returns the exits of the node's processes that the harness did
// not ask for.
func (c *cluster) crashed() []string {
	var all []string
	for _, nd := range c.nodes {
		nd.mu.Lock()
		all = append(all, nd.crashes...)
		nd.mu.Unlock()
	}
	return all
}

// restart starts the node again and waits until it takes logins.
func (nd *node) restart() error {
	if err := nd.start(); err != nil {
		return err
	}
	return nd.waitReady(90 * time.Second)
}

// running says the process is up (paused counts as up).
func (nd *node) running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil {
		return false
	}
	select {
	case <-nd.exited:
		return false
	default:
		return true
	}
}

// signal sends sig and, for a signal that ends the process, waits up to
// wait for it to exit.
func (nd *node) signal(sig syscall.Signal, wait time.Duration) error {
	nd.mu.Lock()
	cmd, exited := nd.cmd, nd.exited
	nd.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", nd.name, err)
	}
	if wait == 0 {
		return nil
	}
	select {
	case <-exited:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("%s did not exit within %s of %v", nd.name, wait, sig)
	}
}

func (nd *node) kill() error {
	nd.expectExit()
	return nd.signal(syscall.SIGKILL, 10*time.Second)
}

// stop is a graceful stop; a node that takes too long is killed.
func (nd *node) stop() error {
	nd.expectExit()
	if err := nd.signal(syscall.SIGTERM, 60*time.Second); err != nil {
		nd.kill()
		return err
	}
	return nil
}

// expectExit notes that the process is about to be asked to end.
func (nd *node) expectExit() {
	nd.mu.Lock()
	nd.ending = true
	nd.mu.Unlock()
}

func (nd *node) pause() error {
	nd.mu.Lock()
	nd.paused = true
	nd.mu.Unlock()
	return nd.signal(syscall.SIGSTOP, 0)
}

func (nd *node) resume() error {
	nd.mu.Lock()
	paused := nd.paused
	nd.paused = false
	nd.mu.Unlock()
	if !paused {
		return nil
	}
	return nd.signal(syscall.SIGCONT, 0)
}

// waitReady waits until a login works: the node has joined the cluster and
// holds the metadata that seeds the user.
func (nd *node) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var err error
	for time.Now().Before(deadline) {
		if !nd.running() {
			return fmt.Errorf("%s exited while starting (log: %s)", nd.name, filepath.Join(nd.dir, "warren.log"))
		}
		var conn *amqp091.Connection
		conn, err = amqp091.DialConfig(nd.uri(), amqp091.Config{Dial: amqp091.DefaultDial(2 * time.Second)})
		if err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s took no login within %s: %v", nd.name, limit, err)
}

// heal undoes every fault: resumes paused nodes, restores links and starts
// nodes that are down.
func (c *cluster) heal() error {
	var errs []error
	for i, nd := range c.nodes {
		if err := nd.resume(); err != nil {
			errs = append(errs, err)
		}
		if c.lab != nil {
			c.lab.heal(i)
		}
		if !nd.running() {
			if err := nd.start(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, nd := range c.nodes {
		if err := nd.waitReady(90 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stopAll stops every node gracefully, resuming paused ones first.
func (c *cluster) stopAll() {
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		nd.resume()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := nd.stop(); err != nil {
				c.log.Warn("stop", "node", nd.name, "err", err)
			}
		}()
	}
	wg.Wait()
}

// ctl runs warrenctl against the first node that is up and not paused (the
// internal addresses are reachable from the host, over the bridge in
// namespaces), going on to the next while a node's admin service is
// unreachable. It returns warrenctl's combined output.
// ctlNode runs warrenctl against node i, for a command about that node
// itself.
func (c *cluster) ctlNode(ctx context.Context, warrenctl string, i int, args ...string) (string, error) {
	full := append(append([]string{"--node", c.nodes[i].internal, "--timeout", "20s"}, c.ctlAuth...), args...)
	out, err := exec.CommandContext(ctx, warrenctl, full...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (c *cluster) ctl(ctx context.Context, warrenctl string, args ...string) (string, error) {
	out, err := []byte("no node is up"), errors.New("no node is up")
	for _, nd := range c.nodes {
		nd.mu.Lock()
		paused := nd.paused
		nd.mu.Unlock()
		if paused || !nd.running() {
			continue
		}
		full := append(append([]string{"--node", nd.internal, "--timeout", "20s"}, c.ctlAuth...), args...)
		out, err = exec.CommandContext(ctx, warrenctl, full...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Unavailable") {
			break
		}
	}
	return strings.TrimSpace(string(out)), err
}
