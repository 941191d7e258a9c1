package raftlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Raft's lines keep their level, except the warnings every group produces
// in normal operation, which go to debug.
func TestLevels(t *testing.T) {
	var buf bytes.Buffer
	l := newLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), hclog.Info, newQuieter(time.Now), "")
	l.Info("entering follower state")
	l.Warn("failed to get previous log", "previous-index", 1, "last-index", 0)
	l.Warn("appendEntries rejected, sending older logs", "next", 1)
	l.Warn("heartbeat timeout reached, starting election")
	l.Warn("rejecting pre-vote request since we have a leader", "from", "a", "leader", "b")
	l.Warn("rejecting pre-vote request since node is not in configuration", "from", "c")
	l.Warn("failed to contact quorum of nodes, stepping down")
	l.Error("failed to heartbeat to", "peer", "x")
	want := []string{
		"level=INFO msg=\"raft: entering follower state\"",
		"level=DEBUG msg=\"raft: failed to get previous log: previous-index=1 last-index=0\"",
		"level=DEBUG msg=\"raft: appendEntries rejected, sending older logs: next=1\"",
		"level=DEBUG msg=\"raft: heartbeat timeout reached, starting election\"",
		"level=DEBUG msg=\"raft: rejecting pre-vote request since we have a leader: from=a leader=b\"",
		"level=WARN msg=\"raft: rejecting pre-vote request since node is not in configuration: from=c\"",
		"level=WARN msg=\"raft: failed to contact quorum of nodes, stepping down\"",
		"level=ERROR msg=\"raft: failed to heartbeat to: peer=x\"",
	}
	checkLines(t, buf.String(), want)
}

// A member's refusal of the vote request it sent itself to raise its term
// names itself as the candidate: debug, not a warning. Another candidate's,
// including one whose address begins with this member's, stays a warning.
func TestOwnVoteRequestRefusalIsDebug(t *testing.T) {
	var buf bytes.Buffer
	sl := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := NewMember(sl, hclog.Warn, "127.0.0.1:2570")
	l.Warn("rejecting vote request since our last term is greater", "candidate", "127.0.0.1:2570", "last-term", 3, "last-candidate-term", 0)
	l.Warn("rejecting vote request since we have a leader", "from", "127.0.0.1:2570", "leader", "x", "leader-id", "n2")
	l.Warn("rejecting vote request since our last term is greater", "candidate", "127.0.0.1:25702", "last-term", 3, "last-candidate-term", 2)
	l.Warn("rejecting vote request since our last term is greater", "candidate", "127.0.0.2:2570", "last-term", 3, "last-candidate-term", 2)
	want := []string{
		"level=DEBUG msg=\"raft: rejecting vote request since our last term is greater: candidate=127.0.0.1:2570 last-term=3",
		"level=DEBUG msg=\"raft: rejecting vote request since we have a leader: from=127.0.0.1:2570 leader=x leader-id=n2\"",
		"level=WARN msg=\"raft: rejecting vote request since our last term is greater: candidate=127.0.0.1:25702",
		"level=WARN msg=\"raft: rejecting vote request since our last term is greater: candidate=127.0.0.2:2570",
	}
	checkLines(t, buf.String(), want)
}

// checkLines checks that out has one line per want, each containing it.
func checkLines(t *testing.T, out string, want []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %s, want it to contain %s", i, lines[i], w)
		}
	}
}

// Lines about an unreachable peer are written once per quietPeriod for
// each kind and peer, whichever group logs them, with the count of those
// left out; other lines all pass.
func TestPeerTroubleQuieted(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newQuieter(func() time.Time { return now })
	var buf bytes.Buffer
	sl := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	groups := []hclog.Logger{newLogger(sl, hclog.Warn, q, ""), newLogger(sl, hclog.Warn, q, ""), newLogger(sl, hclog.Warn, q, "")}
	for i := range 90 {
		g := groups[i%3]
		g.Error("failed to heartbeat to", "peer", "10.0.0.3:25672", "error", "connection refused")
		g.Error("failed to appendEntries to", "peer", "{Voter n3 10.0.0.3:25672}", "error", "connection refused")
	}
	groups[0].Error("failed to heartbeat to", "peer", "10.0.0.4:25672", "error", "connection refused")
	groups[1].Warn("failed to contact quorum of nodes, stepping down")
	groups[2].Warn("failed to contact quorum of nodes, stepping down")
	if got := strings.Count(buf.String(), "\n"); got != 5 {
		t.Fatalf("%d lines, want 5 (one per kind and peer, and both step-downs):\n%s", got, buf.String())
	}
	now = now.Add(quietPeriod)
	buf.Reset()
	groups[1].Error("failed to heartbeat to", "peer", "10.0.0.3:25672", "error", "connection refused")
	groups[1].Error("failed to heartbeat to", "peer", "10.0.0.3:25672", "error", "connection refused")
	if out := strings.TrimSpace(buf.String()); strings.Count(out, "\n") != 0 || !strings.Contains(out, "similar=89") {
		t.Fatalf("after the quiet period got %q, want one line with similar=89", out)
	}
}
