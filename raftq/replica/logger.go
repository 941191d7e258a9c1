package replica

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// newRaftLogger gives raft an hclog.Logger that writes into slog. raft's
// info chatter (elections, snapshots) goes to debug: with one group per
// queue it would drown everything else.
func newRaftLogger(l *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:   "raft",
		Level:  hclog.Warn,
		Output: slogWriter{l.With("component", "raft")},
	})
}

type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	msg := string(p)
	for len(msg) > 0 && msg[len(msg)-1] == '\n' {
		msg = msg[:len(msg)-1]
	}
	level := slog.LevelWarn
	if strings.Contains(msg, "heartbeat timeout reached, starting election") {
		// Every group starts this way, a single-member one included: it
		// is news only when it repeats, which debug logging shows.
		level = slog.LevelDebug
	}
	w.l.Log(context.Background(), level, msg)
	return len(p), nil
}

var _ io.Writer = slogWriter{}
