// Package raftlog gives hashicorp/raft an hclog.Logger that writes into
// log/slog, each line at the level raft gave it, without hclog's own
// timestamp and level prefix.
package raftlog

import (
	"context"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// New returns a logger for raft that writes lines at min and above to l.
// The queue groups use hclog.Warn (one group per queue: their elections
// and snapshots would drown everything else), the metadata group
// hclog.Info.
func New(l *slog.Logger, min hclog.Level) hclog.Logger { return newLogger(l, min, shared, "") }

// NewMember is New for a member of a group whose transport has local
// address self and which asks itself for votes (a queue group's member
// raising its term before a campaign, cluster/transport's RaiseTerm).
// raft refuses such a request at WARN and names the member itself as the
// candidate, which reads as another node campaigning; those lines go to
// debug.
func NewMember(l *slog.Logger, min hclog.Level, self string) hclog.Logger {
	return newLogger(l, min, shared, self)
}

func newLogger(l *slog.Logger, min hclog.Level, q *quieter, self string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        "raft",
		Level:       min,
		DisableTime: true,
		Output:      writer{l, q, self},
	})
}

var levels = []struct {
	prefix string
	level  slog.Level
}{
	{"[TRACE]", slog.LevelDebug},
	{"[DEBUG]", slog.LevelDebug},
	{"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn},
	{"[ERROR]", slog.LevelError},
}

type writer struct {
	l    *slog.Logger
	q    *quieter // lines about unreachable peers (quiet.go)
	self string   // the member's own address, or ""
}

func (w writer) Write(p []byte) (int, error) {
	msg := strings.TrimRight(string(p), "\n")
	level := slog.LevelInfo
	for _, l := range levels {
		if rest, ok := strings.CutPrefix(msg, l.prefix); ok {
			msg, level = strings.TrimSpace(rest), l.level
			break
		}
	}
	if kindOf(msg, routineWarnings) != "" || w.fromSelf(msg) {
		level = slog.LevelDebug
	}
	msg, ok := w.q.filter(msg)
	if !ok {
		return len(p), nil
	}
	w.l.Log(context.Background(), level, msg)
	return len(p), nil
}

// routineWarnings are lines raft logs at WARN for what every group does
// in the normal run of things: each starts with an election, and each new
// member (every follower of a newly declared queue: it starts empty) and
// each member that was down has its log repaired, the leader's first
// AppendEntries refused and older entries sent. A thousand declared
// queues made two thousand such lines on every node. They are news only
// when they repeat, which debug logging shows. So are the refusals of
// pre-votes that have a reason in an election, and every member that
// starts asks whether its group would elect it (replica's failover.go):
// a node restarted with a thousand queues made its peers log two
// thousand such refusals.
var routineWarnings = []string{
	"heartbeat timeout reached, starting election",
	"failed to get previous log",
	"appendEntries rejected, sending older logs",
	"rejecting pre-vote request since we have a leader",
	"rejecting pre-vote request since our last term is greater",
	"rejecting pre-vote request since our last index is greater",
}

// fromSelf says whether msg is raft refusing a vote request that the
// member sent itself.
func (w writer) fromSelf(msg string) bool {
	if w.self == "" || !strings.HasPrefix(strings.TrimPrefix(msg, "raft: "), "rejecting vote request") {
		return false
	}
	for _, key := range []string{" candidate=", " from="} { // raft names it either way
		if _, rest, ok := strings.Cut(msg, key+w.self); ok && (rest == "" || rest[0] == ' ') {
			return true
		}
	}
	return false
}

// kindOf is the one of kinds that raft's line msg begins with (after the
// logger's name), or "".
func kindOf(msg string, kinds []string) string {
	text := strings.TrimPrefix(msg, "raft: ")
	for _, k := range kinds {
		if strings.HasPrefix(text, k) {
			return k
		}
	}
	return ""
}
