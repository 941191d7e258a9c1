package nodetest

import (
	"io"
	"os"
	"strings"
	"sync"
	"testing"
)

// logTailLines is how many of a test's last log lines are kept for a
// failure report: enough for the seconds before a timed-out wait on a
// three-node cluster at debug level.
const logTailLines = 20000

// logTail keeps the last lines the test's nodes logged, so that a test
// that fails (in CI, say, where nobody set WARREN_TEST_LOG) reports what
// the nodes were doing: a flaky cluster test is seldom reproduced by
// hand.
type logTail struct {
	mu    sync.Mutex
	lines []string
	next  int // where the next line goes once lines is full
}

func (l *logTail) Write(p []byte) (int, error) {
	line := string(p) // slog's handlers write one record per call
	l.mu.Lock()
	if len(l.lines) < logTailLines {
		l.lines = append(l.lines, line)
	} else {
		l.lines[l.next] = line
		l.next = (l.next + 1) % logTailLines
	}
	l.mu.Unlock()
	return len(p), nil
}

// String is the kept lines, oldest first.
func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for i := range l.lines {
		b.WriteString(l.lines[(l.next+i)%len(l.lines)])
	}
	return b.String()
}

var tails sync.Map // *testing.T → *logTail

// logOutput is where t's nodes log: stderr with WARREN_TEST_LOG set, else
// a tail that the test prints if it fails. The tail is printed after
// every node of the test stopped (cleanups run last-registered first, and
// this one is registered before any node starts).
func logOutput(t *testing.T) io.Writer {
	if os.Getenv("WARREN_TEST_LOG") != "" {
		return os.Stderr
	}
	if l, ok := tails.Load(t); ok {
		return l.(*logTail)
	}
	l := &logTail{}
	tails.Store(t, l)
	t.Cleanup(func() {
		tails.Delete(t)
		if t.Failed() {
			t.Logf("the nodes' log, at most its last %d lines (WARREN_TEST_LOG=1 prints it all as it comes):\n%s", logTailLines, l)
		}
	})
	return l
}
