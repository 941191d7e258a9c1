package raftlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Raft's lines keep their level, except the warnings every group produces
// in normal operation, which go to debug.
func TestLevels(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), hclog.Info)
	l.Info("entering follower state")
	l.Warn("failed to get previous log", "previous-index", 1, "last-index", 0)
	l.Warn("appendEntries rejected, sending older logs", "next", 1)
	l.Warn("heartbeat timeout reached, starting election")
	l.Warn("failed to contact quorum of nodes, stepping down")
	l.Error("failed to heartbeat to", "peer", "x")
	want := []string{
		"level=INFO msg=\"raft: entering follower state\"",
		"level=DEBUG msg=\"raft: failed to get previous log: previous-index=1 last-index=0\"",
		"level=DEBUG msg=\"raft: appendEntries rejected, sending older logs: next=1\"",
		"level=DEBUG msg=\"raft: heartbeat timeout reached, starting election\"",
		"level=WARN msg=\"raft: failed to contact quorum of nodes, stepping down\"",
		"level=ERROR msg=\"raft: failed to heartbeat to: peer=x\"",
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %s, want it to contain %s", i, lines[i], w)
		}
	}
}
