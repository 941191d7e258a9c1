package membership

import (
	"sync"
	"time"
)

// memberlist stops probing and gossiping to a member once it has declared
// it dead (gossip goes on only for GossipToTheDeadTime, 30 s), and revives
// it only when it hears of a newer incarnation of it, which the member
// makes only when it hears that it was declared dead. After a partition
// long enough for both sides to declare each other dead and stop talking
// to the dead, nothing makes either side hear: each keeps the other dead
// for good, and with it every decision made on gossip (a dead node's
// in-memory queues refused, its queues' leaders suspected). Serf, over
// memberlist, reconnects to failed members for that; so does this: every
// reconnectInterval it joins the members it sees dead (not those that
// left), and the push/pull of the join shows each side the other's view,
// so that both refute and are alive again within a round or two.

// defaultReconnectInterval is how often a node tries the members it sees
// dead. A node falsely dead has its in-memory queues' publishes nacked,
// so seconds, not Serf's 30 s; a join to a node that is truly down costs
// one refused or timed-out connection.
const defaultReconnectInterval = 2 * time.Second

// reconnector runs the reconnect loop until stop.
type reconnector struct {
	once sync.Once
	stop chan struct{}
	done chan struct{}
}

func newReconnector() *reconnector {
	return &reconnector{stop: make(chan struct{}), done: make(chan struct{})}
}

// close stops the loop and waits for it.
func (r *reconnector) close() {
	r.once.Do(func() { close(r.stop) })
	<-r.done
}

// reconnect joins, every interval, the gossip addresses of the members
// this node sees dead.
func (m *Membership) reconnect(r *reconnector, interval time.Duration) {
	defer close(r.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		for _, addr := range m.deadAddrs() {
			select {
			case <-r.stop:
				return
			default:
			}
			if _, err := m.ml.Join([]string{addr}); err == nil {
				m.log.Debug("gossip reached a member it saw dead", "addr", addr)
			}
		}
	}
}

// deadAddrs are the gossip addresses of the members seen dead.
func (m *Membership) deadAddrs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, mb := range m.members {
		if mb.State == Dead && mb.Gossip != "" {
			out = append(out, mb.Gossip)
		}
	}
	return out
}
