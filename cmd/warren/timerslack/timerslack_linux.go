// Package timerslack sets the Linux timer slack of every thread of a Go
// process: the server's --timer-slack, and scripts/machine-cost, which
// measures a served request with the server's settings.
package timerslack

import (
	"cmp"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Set sets the Linux timer slack of every thread of the process to d: how late the kernel may end a timed sleep to wake several sleepers
// at once. The Go runtime's monitor thread (sysmon) sleeps 20 µs at a time
// while any goroutine runs, and a broker at 1,000 msg/s goes from idle to
// busy a thousand times a second, so those wake-ups were about a sixth of
// its CPU; with 1 ms the broker used a quarter less CPU per message, at
// the same confirm latency (docs/performance.md).
// Network and disk wake-ups do not wait on timers and are not delayed.
//
// A thread takes its slack from the thread that creates it, and the
// runtime starts sysmon before any package code runs, so every existing
// thread is set through /proc; setting another thread's needs CAP_SYS_NICE
// (root in the images). Without it only this thread, and the threads it
// creates, get d: refused counts the others.
func Set(d time.Duration) (threads, refused int, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0, 0, 0); err != nil {
		return 0, 0, fmt.Errorf("prctl PR_SET_TIMERSLACK: %w", err)
	}
	self := strconv.Itoa(unix.Gettid())
	val := []byte(strconv.FormatInt(d.Nanoseconds(), 10))
	var first error
	// Twice: a thread created during the first pass by one not yet set
	// took the old slack.
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return 1, 0, fmt.Errorf("list threads: %w", err)
		}
		threads, refused, first = len(tasks), 0, nil
		for _, t := range tasks {
			if t.Name() == self {
				continue
			}
			if err := os.WriteFile("/proc/"+t.Name()+"/timerslack_ns", val, 0); err != nil {
				refused++
				first = cmp.Or(first, err)
			}
		}
	}
	if first != nil {
		return threads, refused, fmt.Errorf("%d of %d threads keep the kernel's slack: %w", refused, threads, first)
	}
	return threads, 0, nil
}
