package broker

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
)

// replayingStore is a cluster member's metadata store that has or has not
// caught up since its node started; nothing else of it is used.
type replayingStore struct {
	Watchable
	caughtUp atomic.Bool
}

func (s *replayingStore) CaughtUp() bool { return s.caughtUp.Load() }

// leadingEngine is a replicated queue led by node that records the
// arguments it is reconfigured with.
type leadingEngine struct {
	queue.Queue
	node string
	mu   sync.Mutex
	got  []wire.Table
}

func (e *leadingEngine) Leader() string { return e.node }

func (e *leadingEngine) Reconfigure(args wire.Table) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, args)
	return nil
}

func (e *leadingEngine) reconfigured() []wire.Table {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]wire.Table(nil), e.got...)
}

// TestNoReconfigureWhileReplaying: a restarted node replays policies set
// and cleared since its last metadata snapshot; the queues it leads are
// not reconfigured with them (a max-length long cleared would drop
// messages for good), only once the node has caught up, with the
// arguments then current.
func TestNoReconfigureWhileReplaying(t *testing.T) {
	st := &replayingStore{}
	b := &Broker{store: st, cfg: Config{NodeID: "n1"}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	b.fresh.init(st, b.log)
	v := newVhost(b, catalog.Vhost{Name: "/"})
	eng := &leadingEngine{node: "n1"}
	q := &Queue{vhost: v, rec: catalog.Queue{Name: "q"}, engine: eng}
	v.queues["q"] = q

	v.mu.Lock()
	q.eff, q.effVer = wire.Table{"x-max-length": int64(1)}, 1 // a policy replayed
	v.mu.Unlock()
	v.pushConfig(q)
	v.mu.Lock()
	q.eff, q.effVer = wire.Table{}, 2 // and its removal, replayed after
	v.mu.Unlock()
	v.pushConfig(q)
	if got := eng.reconfigured(); len(got) != 0 {
		t.Fatalf("reconfigured while replaying: %v", got)
	}

	st.caughtUp.Store(true)
	v.pushConfig(q) // as the reconcile loop does
	testwait.Until(5*time.Second, func() bool { return len(eng.reconfigured()) != 0 })
	got := eng.reconfigured()
	if len(got) != 1 || len(got[0]) != 0 {
		t.Fatalf("reconfigured with %v once caught up, want the current (empty) arguments once", got)
	}
}
