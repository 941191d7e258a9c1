package main

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNodeExitsWithoutBeingAsked: a node's process that ends on its own is
// a crash the verdict counts; one the nemesis kills or stops is not. And a
// paused node lives in a process group of its own, so the signals the
// kernel sends the harness's group (SIGHUP to stopped members when it is
// orphaned) do not reach it.
func TestNodeExitsWithoutBeingAsked(t *testing.T) {
	c := &cluster{}
	for _, name := range []string{"crashes", "killed", "stopped"} {
		c.nodes = append(c.nodes, &node{name: name, dir: t.TempDir(), args: []string{"sleep", "60"}})
	}
	crashes, killed, stopped := c.nodes[0], c.nodes[1], c.nodes[2]
	crashes.args = []string{"sh", "-c", "sleep 0.2; exit 3"}
	for _, nd := range c.nodes {
		if err := nd.start(); err != nil {
			t.Fatal(err)
		}
		pgid, err := syscall.Getpgid(nd.cmd.Process.Pid)
		if err != nil || pgid != nd.cmd.Process.Pid {
			t.Errorf("%s: process group %d (%v), want its own, %d", nd.name, pgid, err, nd.cmd.Process.Pid)
		}
	}
	if err := killed.pause(); err != nil {
		t.Fatal(err)
	}
	if err := killed.kill(); err != nil {
		t.Fatal(err)
	}
	if err := stopped.stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-crashes.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the crashing node did not exit")
	}
	got := c.crashed()
	if len(got) != 1 || !strings.HasPrefix(got[0], "crashes exited at ") || !strings.HasSuffix(got[0], "exit status 3") {
		t.Fatalf("crashes = %q, want the one node that exited on its own, with its status", got)
	}
	if (verdict{Crashed: got}).ok() {
		t.Error("a verdict with a crash judged ok")
	}
	// Started again, a node is watched afresh.
	if err := killed.start(); err != nil {
		t.Fatal(err)
	}
	killed.stop()
	if got := c.crashed(); len(got) != 1 {
		t.Errorf("after a restart and a stop, crashes = %q", got)
	}
}
