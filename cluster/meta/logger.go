package meta

import (
	"context"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// newRaftLogger gives raft an hclog.Logger that writes into slog at the
// level hclog gave each line. The metadata group is one per node, so its
// elections and snapshots are worth info logging.
func newRaftLogger(l *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        "raft",
		Level:       hclog.Info,
		DisableTime: true,
		Output:      slogWriter{l},
	})
}

type slogWriter struct{ l *slog.Logger }

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

func (w slogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimRight(string(p), "\n")
	level := slog.LevelInfo
	for _, l := range levels {
		if rest, ok := strings.CutPrefix(msg, l.prefix); ok {
			msg, level = strings.TrimSpace(rest), l.level
			break
		}
	}
	w.l.Log(context.Background(), level, msg)
	return len(p), nil
}
