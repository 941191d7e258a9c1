package replica

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// inflightLimit bounds a replica's proposed but uncommitted enqueues:
// beyond it Enqueue blocks, and with it the publisher's socket.
const inflightLimit = 4096

// Enqueue proposes the message and calls done once it is committed: a
// publisher confirm is never sent before the entry is on a majority.
func (r *Replica) Enqueue(ctx context.Context, m *queue.Message, done func(error)) error {
	return r.pub.enqueue(ctx, m, 0, 0, done)
}

// ErrOutOfSequence is EnqueueAs's error for a publish whose sequence
// number skips ahead of what the queue has stored for its publisher: an
// earlier publish was lost (a leader change), so the forwarder must send
// again from the first unconfirmed one.
var ErrOutOfSequence = errors.New("replica: publish out of sequence")

// EnqueueAs is Enqueue for a publish forwarded from another node, which
// numbers its own publishes: publisher (non-zero, random per forwarding
// stream) and seq (1, 2, 3…) let the machine store a publish re-sent after
// a leader change only once and confirm it again. Calls for one publisher
// must be made in seq order from one goroutine.
func (r *Replica) EnqueueAs(ctx context.Context, m *queue.Message, publisher, seq uint64, done func(error)) error {
	if publisher == 0 || seq == 0 {
		return fmt.Errorf("replica: EnqueueAs needs a publisher and a sequence number")
	}
	return r.pub.enqueue(ctx, m, publisher, seq, done)
}

// pendingKey identifies a proposed publish awaiting its Confirm or Reject.
type pendingKey struct{ publisher, seq uint64 }

// publishes is the publish pipeline of a leader: it numbers publishes,
// holds them for company (linger.go), appends them to the log and keeps
// their done callbacks until the machine confirms or rejects them
// (pending), bounded by inflightLimit.
type publishes struct {
	core *core

	// publisher and seq number this replica's proposals for the machine's
	// confirm and deduplication bookkeeping; mu keeps seq order equal
	// to log order, so it is held across raft.Apply, which blocks while
	// raft's apply channel is full.
	publisher uint64
	mu        sync.Mutex
	seq       uint64
	slots     chan struct{}
	// pending holds the done callbacks of proposed enqueues, this
	// replica's own and forwarded ones, by publisher and seq; the
	// machine's Confirm and Reject effects complete them. Under pendMu,
	// not mu: the FSM goroutine completes them, and raft's leader loop
	// drains the apply channel only while the FSM takes what it commits,
	// so an FSM waiting for mu would deadlock with an enqueue blocked
	// in raft.Apply.
	pendMu  sync.Mutex
	pending map[pendingKey]func(error)
	// linger holds publishes for company (linger.go), under mu.
	linger heldPublishes
	// tail keeps commit latencies for a hold by PublishLingerShare.
	tail commitTail
	// pendingEpoch counts failPending's answers of pending (raised under
	// pendMu): the held publishes of an earlier epoch are dropped, and
	// seqEpoch (under mu) is the epoch publisher's numbering began in.
	pendingEpoch atomic.Uint64
	seqEpoch     uint64
}

func (p *publishes) enqueue(ctx context.Context, m *queue.Message, publisher, seq uint64, done func(error)) error {
	if done == nil {
		done = func(error) {}
	}
	if p.core.stopped.Load() {
		err := p.core.stoppedErr()
		done(err)
		return err
	}
	if !p.core.isLeader() {
		done(ErrNotLeader)
		return ErrNotLeader
	}
	cmd := raftq.Command{Op: raftq.OpEnqueue, Size: uint32(len(m.Body))}
	props := &m.Properties
	if props.Flags&wire.FlagPriority != 0 || props.Priority != 0 {
		cmd.Priority, cmd.HasPriority = props.Priority, true
	}
	if props.Expiration != "" {
		if ttl, err := strconv.ParseInt(props.Expiration, 10, 64); err == nil && ttl >= 0 {
			cmd.TTL, cmd.HasTTL = ttl, true
		}
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		done(ctx.Err())
		return ctx.Err()
	case <-p.core.done:
		err := p.core.stoppedErr()
		done(err)
		return err
	}
	p.mu.Lock()
	epoch := p.pendingEpoch.Load()
	local := publisher == 0
	if local {
		if epoch != p.seqEpoch {
			// failPending answered publishes of this member that may
			// never reach the log (held ones never do, uncommitted ones
			// a new leader may drop): numbered on after them, every
			// later one would be refused as out of sequence should
			// this member lead again. Number them as a new publisher.
			p.publisher, p.seq, p.seqEpoch = randomID(), 0, epoch
		}
		p.seq++
		publisher, seq = p.publisher, p.seq
	}
	cmd.Publisher, cmd.Seq = publisher, seq
	cmd.Now = time.Now().UnixMilli()
	// The payload is the entry's tail, so the message is encoded straight
	// after the command's fields: one allocation and one copy of the body
	// per publish.
	entry := cmd.Append(make([]byte, 0, 64+len(m.Exchange)+len(m.RoutingKey)+256+len(m.Body)))
	entry, err := appendMessage(entry, m)
	if err == nil {
		p.pendMu.Lock()
		if p.pendingEpoch.Load() != epoch {
			// failPending ran since it was numbered: answered as it
			// answered the others (under pendMu, so that no publish
			// joins pending with an epoch whose held ones are dropped).
			p.pendMu.Unlock()
			err = ErrNotLeader
		}
	}
	if err != nil {
		if local {
			p.seq--
		}
		p.mu.Unlock()
		<-p.slots
		done(err)
		return err
	}
	k := pendingKey{publisher, seq}
	if prev, dup := p.pending[k]; dup {
		// The same publish sent again before its first proposal was
		// answered: both are answered by whichever commits first.
		first := prev
		p.pending[k] = func(err error) { first(err); done(err) }
		<-p.slots // one slot is enough for the pair
	} else {
		p.pending[k] = done
	}
	p.pendMu.Unlock()
	p.proposePublish(entry, epoch)
	p.mu.Unlock()
	return nil
}

// failPending answers every publish still waiting for its commit with err:
// this member stopped leading, and whether those entries commit is now
// up to the new leader. Forwarders send them again there (the machine
// stores a re-sent publish once); local publishers get basic.nack.
func (p *publishes) failPending(err error) {
	p.pendMu.Lock()
	p.pendingEpoch.Add(1) // held publishes among these are not to be stored
	pending := p.pending
	p.pending = make(map[pendingKey]func(error))
	p.pendMu.Unlock()
	for range pending {
		<-p.slots
	}
	for _, done := range pending {
		done(err)
	}
}

// completeEnqueue answers the publish seq of publisher. The FSM calls it
// for the machine's Confirm or Reject effect, that is once the entry is
// committed and applied: never before.
func (p *publishes) completeEnqueue(publisher, seq uint64, err error) {
	k := pendingKey{publisher, seq}
	p.pendMu.Lock()
	done, ok := p.pending[k]
	delete(p.pending, k)
	p.pendMu.Unlock()
	if ok {
		<-p.slots
		done(err)
	}
}

// waiting is how many proposed publishes await their confirm.
func (p *publishes) waiting() int {
	p.pendMu.Lock()
	defer p.pendMu.Unlock()
	return len(p.pending)
}
