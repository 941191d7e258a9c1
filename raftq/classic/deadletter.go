package classic

import (
	"context"
	"sync"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// maxDeadLetterBacklog bounds the body bytes of dead letters waiting to be
// published; beyond it they are dropped (at-most-once may lose messages,
// and the queue's lock must never wait for a slow target), as in the
// replica.
const maxDeadLetterBacklog = 64 << 20

// deadLetterer publishes dead letters through Config.DeadLetter, in the
// order the machine produced them, from one goroutine started on demand:
// a target's Enqueue may block, and routing takes the vhost's lock, which
// the broker holds while it deletes (and so locks) this queue.
type deadLetterer struct {
	q      *Queue
	ctx    context.Context
	cancel context.CancelFunc

	mu          sync.Mutex
	jobs        []deadLetterJob
	backlog     int
	running     bool
	overflowing bool
}

type deadLetterJob struct {
	m      *queue.Message
	reason raftq.Reason
	at     int64
}

func newDeadLetterer(q *Queue) *deadLetterer {
	ctx, cancel := context.WithCancel(context.Background())
	return &deadLetterer{q: q, ctx: ctx, cancel: cancel}
}

// add queues a dead letter. It never blocks.
func (d *deadLetterer) add(m *queue.Message, reason raftq.Reason, at int64) {
	if d.q.cfg.DeadLetter == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.backlog+len(m.Body) > maxDeadLetterBacklog {
		if !d.overflowing {
			d.q.log.Warn("dead-letter targets too slow; dropping dead letters", "backlog_bytes", d.backlog)
		}
		d.overflowing = true
		return
	}
	d.overflowing = false
	d.backlog += len(m.Body)
	d.jobs = append(d.jobs, deadLetterJob{m: m, reason: reason, at: at})
	if !d.running {
		d.running = true
		go d.run()
	}
}

// run publishes until nothing is queued.
func (d *deadLetterer) run() {
	for {
		d.mu.Lock()
		jobs := d.jobs
		d.jobs = nil
		if len(jobs) == 0 || d.ctx.Err() != nil {
			d.running = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
		for _, j := range jobs {
			if d.ctx.Err() == nil {
				d.q.cfg.DeadLetter(d.ctx, j.m, j.reason, j.at, func(err error) {
					if err != nil {
						d.q.log.Debug("dead letter dropped", "reason", j.reason.String(), "err", err)
					}
				})
			}
			d.mu.Lock()
			d.backlog -= len(j.m.Body)
			d.mu.Unlock()
		}
	}
}

// stop cancels a publish that waits for room in a target. Dead letters
// already queued are dropped: the queue is gone.
func (d *deadLetterer) stop() { d.cancel() }
