package alarm

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDiskFreeLimit is RabbitMQ's default disk_free_limit: 50 MB.
const DefaultDiskFreeLimit = 50_000_000

// How often DiskMonitor looks at the free space, as RabbitMQ's disk monitor:
// from every 100 ms near the limit to every 10 s far from it, assuming
// the disk fills no faster than fillRate. While the alarm is on it looks
// every second, so freed space unblocks publishers promptly (RabbitMQ
// waits its longest interval then); statfs costs microseconds.
const (
	minDiskInterval     = 100 * time.Millisecond
	maxDiskInterval     = 10 * time.Second
	alarmedDiskInterval = time.Second
	fillRate            = 250_000_000 // bytes a second
)

// DiskMonitor watches the free space of the file system holding a directory and
// keeps set's disk alarm on while it is below the limit, as RabbitMQ's
// disk_free_limit. A limit of zero or less never raises it.
type DiskMonitor struct {
	dir string
	set *Set
	log *slog.Logger

	limit atomic.Int64
	free  atomic.Int64 // at the last look; -1 before one succeeded

	// mu serializes looks (the loop's and SetLimit's).
	mu     sync.Mutex
	failed bool // the last look failed (logged once until one succeeds)

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// StartDiskMonitor looks at dir's free space now and then in the background
// until Close.
func StartDiskMonitor(dir string, limit int64, set *Set, log *slog.Logger) *DiskMonitor {
	if log == nil {
		log = slog.Default()
	}
	d := &DiskMonitor{dir: dir, set: set, log: log, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	d.limit.Store(limit)
	d.free.Store(-1)
	d.check()
	log.Info("free disk space monitoring", "dir", dir, "limit_bytes", limit, "free_bytes", d.free.Load())
	go d.loop()
	return d
}

// Limit is the free space below which the alarm is on.
func (d *DiskMonitor) Limit() int64 { return d.limit.Load() }

// Free is the free space at the last look (bytes available to the
// node's user), or -1 if none succeeded.
func (d *DiskMonitor) Free() int64 { return d.free.Load() }

// SetLimit changes the limit (rabbitmqctl set_disk_free_limit) and looks
// at once, so the alarm is as the new limit says when it returns.
func (d *DiskMonitor) SetLimit(limit int64) {
	d.limit.Store(limit)
	d.check()
	d.log.Info("disk free limit set", "limit_bytes", limit, "free_bytes", d.free.Load())
	select {
	case d.wake <- struct{}{}: // the loop's interval follows the new limit
	default:
	}
}

// Close stops watching; the alarm stays as it was.
func (d *DiskMonitor) Close() {
	close(d.stop)
	<-d.done
}

func (d *DiskMonitor) loop() {
	defer close(d.done)
	t := time.NewTimer(d.interval())
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-d.wake:
		case <-t.C:
			d.check()
		}
		t.Reset(d.interval())
	}
}

// check looks at the free space and raises or clears the alarm.
func (d *DiskMonitor) check() {
	d.mu.Lock()
	defer d.mu.Unlock()
	free, err := freeBytes(d.dir)
	if err != nil {
		// The alarm stays as it was: a file system that cannot be asked
		// says nothing about its space.
		if !d.failed {
			d.log.Error("cannot read free disk space", "dir", d.dir, "err", err)
		}
		d.failed = true
		return
	}
	d.failed = false
	d.free.Store(free)
	limit := d.limit.Load()
	if limit > 0 && free < limit {
		d.set.Raise(Disk)
	} else {
		d.set.Clear(Disk)
	}
}

// interval is the time to the next look: the time the disk would take to
// fill the space above the limit twice over at fillRate, within bounds.
func (d *DiskMonitor) interval() time.Duration {
	if d.limit.Load() > 0 && d.free.Load() >= 0 && d.free.Load() < d.limit.Load() {
		return alarmedDiskInterval
	}
	ideal := time.Duration(float64(2*(d.free.Load()-d.limit.Load())) / fillRate * float64(time.Second))
	return min(max(ideal, minDiskInterval), maxDiskInterval)
}

// freeBytes is the space of dir's file system available to this process's
// user (df's "Avail").
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
