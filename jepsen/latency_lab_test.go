package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The namespace test runs this test binary again inside the namespaces, as
// an echo server or as a client timing round trips, chosen by
// environment: a process in a namespace is the only way to open a
// connection from it.
const (
	labEchoEnv   = "JEPSEN_TEST_ECHO"
	labClientEnv = "JEPSEN_TEST_PINGER"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(labEchoEnv); addr != "" {
		labEcho(addr)
		return
	}
	if addr := os.Getenv(labClientEnv); addr != "" {
		labPinger(addr)
		return
	}
	os.Exit(m.Run())
}

// labEcho echoes every connection to addr until killed.
func labEcho(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() { defer c.Close(); io.Copy(c, c) }()
	}
}

// labPinger holds a connection to addr and prints each round trip's
// milliseconds every 50 ms, and "reconnect" whenever it had to dial
// again, until killed.
func labPinger(addr string) {
	var c net.Conn
	for {
		if c == nil {
			var err error
			if c, err = net.DialTimeout("tcp", addr, time.Second); err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		start := time.Now()
		c.SetDeadline(start.Add(2 * time.Second))
		_, err := c.Write([]byte{1})
		if err == nil {
			_, err = io.ReadFull(c, make([]byte, 1))
		}
		if err != nil {
			c.Close()
			c = nil
			fmt.Println("reconnect")
			continue
		}
		fmt.Println(time.Since(start).Milliseconds())
		time.Sleep(50 * time.Millisecond)
	}
}

// inNamespace starts this test binary in ns with env set, and returns its
// output's lines.
func inNamespace(t *testing.T, ns, env string) <-chan string {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1024)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case lines <- s.Text():
			default: // the test reads only while it looks
			}
		}
	}()
	return lines
}

// roundTrips waits until the pinger's established connection reports n
// round trips in a row, and returns the smallest; a "reconnect" starts
// the count again and is reported.
func roundTrips(t *testing.T, lines <-chan string, n int) (smallest time.Duration, reconnected bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for k := 0; k < n; {
		select {
		case l := <-lines:
			if l == "reconnect" {
				reconnected, k, smallest = true, 0, 0
				continue
			}
			ms, err := strconv.Atoi(l)
			if err != nil {
				t.Fatalf("pinger: %s", l)
			}
			if d := time.Duration(ms) * time.Millisecond; k == 0 || d < smallest {
				smallest = d
			}
			k++
		case <-deadline:
			t.Fatalf("no %d round trips within 30s", n)
		}
	}
	return smallest, reconnected
}

// discardLines empties lines of what came before now.
func discardLines(lines <-chan string) {
	for {
		select {
		case <-lines:
		default:
			return
		}
	}
}

// TestLatencyFaultInNamespaces puts the latency fault between two real
// namespaces: a connection established before it is reset and dials
// again through the proxy, whose round trips then take at least twice the
// smallest delay; the heal leaves no rule behind and the connection,
// reset again, goes straight once more.
func TestLatencyFaultInNamespaces(t *testing.T) {
	if why := labAvailable(); why != "" {
		t.Skip(why)
	}
	l, err := newLab(2, 199-os.Getpid()%50)
	if err != nil {
		t.Skipf("namespaces: %v", err)
	}
	defer l.close()
	c := &cluster{lab: l}
	for i, ip := range l.ips {
		c.nodes = append(c.nodes, &node{name: fmt.Sprintf("warren-%d", i), internal: ip + ":25672"})
	}
	// Connection tracking follows the connection from its start, as it
	// does in a namespace where an earlier fault loaded it: the nat rule
	// then leaves the established connection alone, and only the reset
	// rule ends it. (Untracked, its next packet would be picked up as a
	// new connection, redirected mid-stream and refused by the host.)
	for _, cmd := range [][]string{
		{"add", "table", "ip", "track"},
		{"add", "chain", "ip", "track", "out", "{ type filter hook output priority 0; }"},
		{"add", "rule", "ip", "track", "out", "ct", "state", "established", "counter"},
	} {
		if err := sh(append([]string{"ip", "netns", "exec", l.ns[0], "nft"}, cmd...)...); err != nil {
			t.Fatal(err)
		}
	}
	inNamespace(t, l.ns[1], labEchoEnv+"="+c.nodes[1].internal)
	lines := inNamespace(t, l.ns[0], labClientEnv+"="+c.nodes[1].internal)
	if rtt, _ := roundTrips(t, lines, 5); rtt > 50*time.Millisecond {
		t.Fatalf("a direct round trip took %s", rtt)
	}

	discardLines(lines) // what follows comes after the fault is applied, or just before it
	n := &nemesis{log: slog.New(slog.NewTextHandler(io.Discard, nil)), c: c, w: &workload{}, rng: seeded(7), counts: map[string]int{}}
	_, shape, heal, err := n.latency(context.Background())
	if err != nil {
		heal()
		t.Fatal(err)
	}
	plan := planLatency(seeded(7))
	t.Logf("latency: %s", shape)
	rtt, reconnected := roundTrips(t, lines, 5)
	if !reconnected {
		t.Error("the connection made before the fault was not reset")
	}
	if low := 2 * (plan.base - plan.jitter); rtt < low {
		t.Errorf("round trips through the fault took %s, want at least %s", rtt, low)
	}
	discardLines(lines)
	if err := heal(); err != nil {
		t.Fatalf("heal: %v", err)
	}
	if ev := strings.Join(n.events, "\n"); !strings.Contains(ev, "node connections through the proxies") || strings.Contains(ev, " 0 node connections") {
		t.Errorf("events: %v", n.events)
	}
	for _, ns := range l.ns {
		if exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "ip", latencyTable).Run() == nil {
			t.Errorf("%s still holds the latency table", ns)
		}
	}
	rtt, reconnected = roundTrips(t, lines, 5)
	if !reconnected {
		t.Error("the connection through the proxy was not ended at the heal")
	}
	if rtt > 50*time.Millisecond {
		t.Errorf("a round trip after the heal took %s", rtt)
	}
}
