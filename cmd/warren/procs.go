package main

import (
	"log/slog"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// The Go scheduler's processors (GOMAXPROCS) follow the node's load: one
// while the node uses little CPU, the runtime's default (the machine's or
// the cgroup's CPUs) while it uses more.
//
// With several processors, a goroutine made runnable while its waker runs
// on (a channel send, a network read) wakes an idle processor's thread to
// look for work, and at low load that thread mostly finds none and sleeps
// again: a futex wake-up, a spin and a context switch each time. A node at
// 1,000 msg/s makes a few dozen such hand-offs per message; on one
// processor it used about a sixth less CPU per message at about the same
// latency (docs/performance.md). A single processor
// cannot run more than one core of Go code, so the node gets them all
// back as soon as it uses procsUpAt, within one procsInterval.
const (
	procsInterval = 500 * time.Millisecond
	// procsUpAt is the CPU, in cores, over one interval that brings back
	// every processor: well below the one core a single processor could
	// give, so that goroutines do not queue for it, and below what a node
	// gets on a shared machine at full speed (three nodes on two cores:
	// about 0.6 each; at 0.7 they stayed on one and moved a sixth fewer
	// messages).
	procsUpAt = 0.5
	// procsDownAt is the CPU below which, for procsDownAfter intervals in
	// a row, the node goes down to one processor; the gap to procsUpAt
	// keeps a node near either from switching back and forth.
	procsDownAt    = 0.35
	procsDownAfter = 4
)

// procScaler decides the number of processors from the CPU the node used
// in each interval.
type procScaler struct {
	max   int // processors while busy
	procs int // the current number
	quiet int // intervals in a row below procsDownAt
}

func newProcScaler(max int) *procScaler { return &procScaler{max: max, procs: max} }

// observe takes the cores used over the last interval and returns the
// processors to run with next.
func (s *procScaler) observe(cores float64) int {
	switch {
	case cores >= procsUpAt:
		s.quiet = 0
		s.procs = s.max
	case cores < procsDownAt:
		s.quiet++
		if s.quiet >= procsDownAfter {
			s.procs = 1
		}
	default:
		s.quiet = 0
	}
	return s.procs
}

// adaptProcs sets GOMAXPROCS from the process's CPU time every
// procsInterval, for the life of the process. It does nothing on a single
// CPU.
func adaptProcs(log *slog.Logger) {
	s := newProcScaler(runtime.GOMAXPROCS(0))
	if s.max < 2 {
		return
	}
	log.Debug("scheduler processors follow the load", "max", s.max)
	last, lastAt := cpuTime(), time.Now()
	t := time.NewTicker(procsInterval)
	defer t.Stop()
	for range t.C {
		used, at := cpuTime(), time.Now()
		cores := float64(used-last) / float64(at.Sub(lastAt))
		last, lastAt = used, at
		if p := s.observe(cores); p != runtime.GOMAXPROCS(0) {
			runtime.GOMAXPROCS(p)
			log.Debug("scheduler processors", "procs", p, "cores_used", cores)
		}
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
