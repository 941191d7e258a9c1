package alarm

import (
	"log/slog"
	"runtime"
	"runtime/metrics"
	"time"
)

// MemoryInterval is how often the memory monitor looks at the node's
// memory, as RabbitMQ's vm_memory_monitor (its memory_monitor_interval
// defaults to a second or more). Message bytes entering and leaving
// in-memory queues move the alarm at once in between (queue.Budget).
const MemoryInterval = time.Second

// MemoryGauge is what the memory monitor feeds (queue.Budget): it takes
// the node's memory in use, raising or clearing the memory alarm, against
// its limit (zero or less: none).
type MemoryGauge interface {
	Limit() int64
	Observe(inUse int64)
}

// MemoryMonitor feeds a gauge the process's memory in use every
// MemoryInterval until Close.
type MemoryMonitor struct {
	gauge  MemoryGauge
	sample func() int64
	log    *slog.Logger
	stop   chan struct{}
	done   chan struct{}
}

// StartMemoryMonitor looks at the process's memory now and then in the
// background. sample is ProcessMemory unless a test gives another.
func StartMemoryMonitor(g MemoryGauge, sample func() int64, log *slog.Logger) *MemoryMonitor {
	if sample == nil {
		sample = ProcessMemory
	}
	if log == nil {
		log = slog.Default()
	}
	m := &MemoryMonitor{gauge: g, sample: sample, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	m.Check()
	go m.loop()
	return m
}

// Close stops watching; the alarm stays as it was. A nil monitor is
// none.
func (m *MemoryMonitor) Close() {
	if m == nil {
		return
	}
	close(m.stop)
	<-m.done
}

func (m *MemoryMonitor) loop() {
	defer close(m.done)
	t := time.NewTicker(MemoryInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.Check()
		}
	}
}

// Check feeds the gauge one look at the memory in use. Memory the
// collector has not yet reclaimed counts as used until it runs, and a
// node below its watermark needs no hurry; one at or above it collects
// garbage first and feeds the look after, so that dead messages neither
// raise the alarm nor keep it on (RabbitMQ's nodes collect garbage on a
// memory alarm for the same reason). While the live memory stays above
// the watermark that is one collection a look.
func (m *MemoryMonitor) Check() {
	inUse := m.sample()
	if limit := m.gauge.Limit(); limit > 0 && inUse >= limit {
		start := time.Now()
		runtime.GC()
		inUse = m.sample()
		if inUse >= limit {
			m.log.Debug("above the memory high watermark after a collection", "in_use_bytes", inUse, "limit_bytes", limit, "gc", time.Since(start))
		}
	}
	m.gauge.Observe(inUse)
}

// The runtime's memory classes whose sum, less what is free or returned
// to the operating system, is the memory the process uses: its heap
// objects (live, and dead until the next collection), goroutine stacks
// and the runtime's own structures. This is close to its anonymous
// resident memory; Warren allocates nothing outside Go's heap (no cgo),
// and the file pages of its logs are the kernel's to reclaim.
var memoryMetrics = []string{
	"/memory/classes/total:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
}

// ProcessMemory is the memory the process uses, in bytes.
func ProcessMemory() int64 {
	s := make([]metrics.Sample, len(memoryMetrics))
	for i, name := range memoryMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	total, free, released := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
	return int64(total - free - released)
}
