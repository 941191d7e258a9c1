package node

import (
	"fmt"
	"time"

	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/alarm"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/membership"
)

// Resource alarms across the cluster: each node announces its own by
// gossip (membership.Meta.Alarms) and keeps the others' in its alarm set,
// whose publishers wait while any node has one in effect, as a RabbitMQ
// cluster's alarms are cluster-wide.

// alarmEvent keeps set's record of another node's alarms as gossip reports
// them; a node that failed or left has none.
func alarmEvent(set *alarm.Set, ev membership.Event) {
	switch ev.Kind {
	case membership.Failed, membership.Departed:
		set.ForgetNode(ev.Member.Name)
	default:
		rs := make([]alarm.Resource, len(ev.Member.Alarms))
		for i, a := range ev.Member.Alarms {
			rs[i] = alarm.Resource(a)
		}
		set.SetNode(ev.Member.Name, rs)
	}
}

// announceAlarms gossips this node's own alarms each time they change.
func (c *clusterNode) announceAlarms(set *alarm.Set) {
	defer c.wg.Done()
	for {
		changed := set.LocalChanged() // before reading, to miss no change
		local := set.Local()
		names := make([]string, len(local))
		for i, r := range local {
			names[i] = string(r)
		}
		if err := c.gossip.SetAlarms(names, time.Second); err != nil {
			c.log.Warn("announce resource alarms", "alarms", names, "err", err)
		}
		select {
		case <-c.stop:
			return
		case <-changed:
		}
	}
}

// SetWatermark changes the node's memory high watermark (alarm.Memory) or
// disk free limit (alarm.Disk) until it stops, value as the flags read it
// (alarm.ParseMemoryLimit, alarm.ParseDiskFreeLimit); the alarm follows at
// once.
func (n *Node) SetWatermark(r alarm.Resource, value string) error {
	switch r {
	case alarm.Memory:
		limit, err := alarm.ParseMemoryLimit(value)
		if err != nil {
			return err
		}
		n.broker.SetMemoryLimit(limit)
		if n.memory != nil {
			n.memory.Check() // a fresh look, not the last one, decides
		}
	case alarm.Disk:
		limit, err := alarm.ParseDiskFreeLimit(value)
		if err != nil {
			return err
		}
		n.disk.SetLimit(limit)
	default:
		return fmt.Errorf("no watermark for resource %q", r)
	}
	return nil
}

// The admin service's view of the alarms (admin.AlarmsBackend).

// alarmAdmin answers for resource alarms and watermarks.
type alarmAdmin struct {
	b *broker.Broker
	n *Node
}

func (a alarmAdmin) Alarms() []alarm.Alarm { return a.b.Alarms().All() }

func (a alarmAdmin) Resources() admin.Resources {
	return admin.Resources{
		MemoryUsed: a.b.MemoryUsed(), MemoryHeld: a.b.MemoryHeld(), MemoryLimit: a.b.MemoryLimit(),
		DiskFree: a.n.disk.Free(), DiskFreeLimit: a.n.disk.Limit(),
	}
}

func (a alarmAdmin) SetWatermark(r alarm.Resource, value string) error {
	if err := a.n.SetWatermark(r, value); err != nil {
		return admin.Invalid(err.Error())
	}
	return nil
}
