package main

import (
	"strings"
	"testing"
	"time"
)

// TestLatencyRules: node 1 of three sends its connections to the others'
// internal ports to their proxies, resets connections still going there
// directly, and leaves its own address alone.
func TestLatencyRules(t *testing.T) {
	internal := []string{"10.150.7.1:25672", "10.150.7.2:25672", "10.150.7.3:25672"}
	proxies := map[int]string{0: "10.150.7.254:40001", 2: "10.150.7.254:40003"}
	cmds, err := latencyRules(internal, 1, proxies)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cmds {
		got = append(got, strings.Join(c, " "))
	}
	want := []string{
		"add table ip latency",
		"add chain ip latency toproxy { type nat hook output priority -100; }",
		"add chain ip latency direct { type filter hook output priority 0; }",
		"add rule ip latency toproxy ip daddr 10.150.7.1 tcp dport 25672 dnat to 10.150.7.254:40001",
		"add rule ip latency toproxy ip daddr 10.150.7.3 tcp dport 25672 dnat to 10.150.7.254:40003",
		"add rule ip latency direct ip daddr . tcp dport { 10.150.7.1 . 25672, 10.150.7.3 . 25672 } reject with tcp reset",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := latencyRules(internal, 1, map[int]string{0: "x:1"}); err == nil || !strings.Contains(err.Error(), "no proxy from node 1 to node 2") {
		t.Errorf("a missing proxy: %v", err)
	}
	if _, err := latencyRules([]string{"10.0.0.1", "10.0.0.2:1"}, 1, proxies); err == nil {
		t.Error("an address without a port was taken")
	}
}

// TestPlanLatency: the delay is 50-200 ms, the jitter a quarter of it,
// and the seed decides it.
func TestPlanLatency(t *testing.T) {
	seen := map[time.Duration]bool{}
	for s := range uint64(200) {
		p := planLatency(seeded(s))
		if p.base < 50*time.Millisecond || p.base > 200*time.Millisecond || p.jitter != (p.base/4).Round(time.Millisecond) {
			t.Fatalf("seed %d: %s", s, p)
		}
		if planLatency(seeded(s)) != p {
			t.Fatalf("seed %d: two plans", s)
		}
		seen[p.base] = true
	}
	if len(seen) < 50 {
		t.Errorf("only %d delays over 200 seeds", len(seen))
	}
}
