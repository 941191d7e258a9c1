package forward

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/raftq/queue"
)

// A router's lifetime, which its parts share: its context, done once it
// is closed or deleted; the wait group Close and Delete wait on for its
// goroutines; and goStopped, set by stop, after which startOnce and spawn
// start nothing.

// sleep waits d, or returns why it cannot: ctx ended, or the router
// closed, unless ctx outlives that (passedon.go).
func (r *Router) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	closed := r.ctx.Done()
	if ctx.Value(outlivesClose{}) != nil {
		closed = nil
	}
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return queue.ErrDeleted
	}
}

// stop ends every stream and returns the consumers.
func (r *Router) stop() []*consumer {
	ws := r.consumers.closeAll()
	r.goMu.Lock()
	r.goStopped = true // no goroutine starts after this: wg.Wait follows
	r.goMu.Unlock()
	r.cancel()
	r.pub.close(queue.ErrDeleted)
	return ws
}

// startOnce runs fn on a goroutine of the router's wait group the first
// time it is called with started, unless the router is stopping.
func (r *Router) startOnce(started *atomic.Bool, fn func()) {
	if started.Load() {
		return
	}
	r.goMu.Lock()
	defer r.goMu.Unlock()
	if r.goStopped || started.Load() {
		return
	}
	started.Store(true)
	r.wg.Add(1)
	go fn()
}

// spawn runs fn on a goroutine of the router's wait group, unless the
// router is stopping.
func (r *Router) spawn(fn func()) {
	r.goMu.Lock()
	defer r.goMu.Unlock()
	if r.goStopped {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn()
	}()
}
