package replica

import (
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq/testwait"
)

// An idle replica has no watcher goroutine, even with a deadline ahead:
// the timer alone brings it back to expire the messages.
func TestWatcherSleepsUntilDeadline(t *testing.T) {
	r := openTest(t, nil, t.TempDir(), wire.Table{"x-message-ttl": int64(2000)})
	defer r.Close()
	enqueue(t, r, 3)
	testwait.For(t, 5*time.Second, "the watcher to stop with messages waiting", func() bool {
		return !r.watch.looking.Load() && r.Stats().Ready == 3
	})
	testwait.For(t, 5*time.Second, "the messages to expire", func() bool { return r.Stats().Ready == 0 })
	testwait.For(t, 5*time.Second, "the watcher to stop again", func() bool { return !r.watch.looking.Load() })
}
