package broker

import (
	"log/slog"

	"github.com/warrenmq/warren/cluster/alarm"
	"github.com/warrenmq/warren/raftq/queue"
)

// resources are the node's resource alarms and the memory its memory
// alarm counts. In-memory queues charge their message bytes to memory
// (queue.Budget); publishing connections wait while an alarm blocks them.
type resources struct {
	// alarms are the resource alarms in effect across the cluster.
	alarms *alarm.Set
	// memory counts the node's memory, message bytes held by in-memory
	// queues at once, and raises the memory alarm.
	memory *queue.Budget
	log    *slog.Logger
}

func (r *resources) init(cfg Config, log *slog.Logger) {
	r.log = log
	r.alarms = alarm.NewSet(cfg.NodeID, log.With("component", "alarm"))
	r.memory = queue.NewBudget(cfg.MemoryLimit, r.alarms.Flip(alarm.Memory))
}

// Alarms is the node's view of the resource alarms in effect across the
// cluster (this node's memory alarm among them; the node adds its disk
// monitor and the other nodes' alarms).
func (r *resources) Alarms() *alarm.Set { return r.alarms }

// Blocking is "" and nil while publishers may go on; otherwise the reason
// connection.blocked gives and a channel closed when the alarms change
// (alarm.Set.Blocking). Publishing connections wait on it.
func (r *resources) Blocking() (reason string, changed <-chan struct{}) { return r.alarms.Blocking() }

// MemoryAlarm reports whether this node's memory alarm is on.
func (r *resources) MemoryAlarm() bool { return r.memory.On() }

// MemoryUsed is the memory the node uses, as its memory alarm counts it.
func (r *resources) MemoryUsed() int64 { return r.memory.Used() }

// MemoryHeld is the message bytes held by in-memory (classic) queues.
func (r *resources) MemoryHeld() int64 { return r.memory.Held() }

// MemoryGauge is what the node's memory monitor feeds
// (alarm.StartMemoryMonitor).
func (r *resources) MemoryGauge() alarm.MemoryGauge { return r.memory }

// MemoryLimit is the memory high watermark (Config.MemoryLimit, or what
// SetMemoryLimit set since); zero if none.
func (r *resources) MemoryLimit() int64 { return r.memory.Limit() }

// SetMemoryLimit changes the memory high watermark until the node stops,
// as rabbitmqctl set_vm_memory_high_watermark; zero or less is none. The
// alarm follows at once.
func (r *resources) SetMemoryLimit(limit int64) {
	r.memory.SetLimit(limit)
	r.log.Info("memory high watermark set", "limit_bytes", limit, "used_bytes", r.memory.Used(), "held_bytes", r.memory.Held())
}
