package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// liveLine is the run's stderr: the log, and on a terminal one status
// line kept below it, rewritten in place. Each log line first wipes the
// status line, then the status line is drawn again under it, so the two
// never mix.
type liveLine struct {
	mu   sync.Mutex
	out  io.Writer
	tty  bool
	line string
}

// newLiveLine writes to f, keeping a status line only when f is a
// terminal.
func newLiveLine(f *os.File) *liveLine {
	st, err := f.Stat()
	return &liveLine{out: f, tty: err == nil && st.Mode()&os.ModeCharDevice != 0}
}

// clearLine is a carriage return and the ANSI "erase to end of line".
const clearLine = "\r\x1b[K"

// Write writes log output above the status line.
func (l *liveLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.line != "" {
		io.WriteString(l.out, clearLine)
	}
	n, err := l.out.Write(p)
	if l.line != "" {
		io.WriteString(l.out, l.line)
	}
	return n, err
}

// set replaces the status line ("" removes it).
func (l *liveLine) set(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.out, clearLine+s)
	l.line = s
}

// progress is what the progress line says of a run in progress.
type progress struct {
	elapsed, total                 time.Duration
	published, confirmed, delivers int
	fault                          string
	// up counts the nodes running and not paused.
	up, nodes int
}

func (p progress) String() string {
	fault := p.fault
	switch {
	case p.elapsed > p.total && fault == "":
		fault = "none (healed: draining, checking)"
	case fault == "":
		fault = "none"
	case len(fault) > maxFaultShown:
		// A network fault's shape can be long; the line must fit a
		// terminal's width, or rewriting it in place fails.
		fault = fault[:maxFaultShown-1] + "…"
	}
	return fmt.Sprintf("%s/%s  published %d  confirmed %d  delivered %d  fault: %s  up %d/%d",
		clock(p.elapsed), clock(p.total), p.published, p.confirmed, p.delivers, fault, p.up, p.nodes)
}

// maxFaultShown is the most of a fault's description the line shows.
const maxFaultShown = 40

// clock is a duration as m:ss.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// counts returns how many messages were published, confirmed and
// delivered (distinct) so far.
func (h *history) counts() (published, confirmed, delivered int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.msgs {
		if !r.published.IsZero() {
			published++
		}
		if !r.confirmed.IsZero() {
			confirmed++
		}
		if len(r.deliveries) > 0 {
			delivered++
		}
	}
	return published, confirmed, delivered
}

// progressLogEvery is how often the progress goes to the log when stderr
// is not a terminal.
const progressLogEvery = 10 * time.Second

// showProgress reports the run's progress until ctx ends: on a terminal
// (live not nil) by rewriting the status line every second, otherwise as
// a log line every progressLogEvery. It removes the status line when it
// returns.
func showProgress(ctx context.Context, live *liveLine, log *slog.Logger, began time.Time, total time.Duration, c *cluster, w *workload, n *nemesis) {
	tty := live != nil && live.tty
	every := progressLogEvery
	if tty {
		every = time.Second
		defer live.set("")
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p := progress{elapsed: time.Since(began), total: total, nodes: len(c.nodes)}
		p.published, p.confirmed, p.delivers = w.h.counts()
		if f := n.inForce.Load(); f != nil {
			p.fault = *f
		}
		for _, nd := range c.nodes {
			if nd.answers() {
				p.up++
			}
		}
		if tty {
			live.set(p.String())
		} else {
			fault := p.fault
			if fault == "" {
				fault = "none"
			}
			log.Info("progress", "at", strings.Fields(p.String())[0], "published", p.published, "confirmed", p.confirmed,
				"delivered", p.delivers, "fault", fault, "up", p.up)
		}
	}
}
