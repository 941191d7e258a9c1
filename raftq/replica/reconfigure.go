package replica

import (
	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// Reconfigure makes args the queue's effective arguments: the limits and
// dead-lettering of the machine change through the log (one UpdateConfig
// entry, applied at the same index by every member). The broker calls it
// when a policy that applies to the queue changes, with the arguments it
// computed (declared ones winning over the policy's).
//
// args are parsed as Open parses Config.Arguments (by the classic rules
// for a Classic replica), and an invalid one is refused, as an error
// wrapping *raftq.ArgError, before anything is proposed. Only the leader
// proposes: another member returns ErrNotLeader, and the caller routes the
// change to the leader. Reconfigure returns once the entry is applied
// here; which settings then affect messages already in the queue is
// RabbitMQ's rule, described at raftq's Machine.updateConfig (a lower
// x-max-length with drop-head drops the excess at once; a new
// x-message-ttl applies to new messages only; x-single-active-consumer
// never changes).
//
// The machine's configuration is in the log and in snapshots, so after a
// restart the queue runs with the last one applied, whatever Open's
// Arguments say; only the classic reject-publish-dlx flag, which the
// machine does not know, comes from Open's Arguments until the next
// Reconfigure.
func (r *Replica) Reconfigure(args wire.Table) error {
	mcfg, dlxOnReject, err := parseArguments(r.cfg.Classic, args)
	if err != nil {
		return err
	}
	if r.stopped.Load() {
		return queue.ErrDeleted
	}
	if !r.isLeader() {
		return ErrNotLeader
	}
	if err := errorFor(r.wait(r.propose(&raftq.Command{Op: raftq.OpUpdateConfig, Config: mcfg}))); err != nil {
		return err
	}
	r.fsm.mu.Lock()
	r.fsm.dlxOnReject = dlxOnReject
	r.fsm.mu.Unlock()
	return nil
}

// Config is the configuration the queue's machine runs with as this member
// has applied it: the declared arguments, or the last Reconfigure's. The
// dead-letter exchange and routing key to use are here, for a
// Config.DeadLetter that follows policy changes.
func (c *core) Config() raftq.Config { return c.queueConfig() }
