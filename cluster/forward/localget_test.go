package forward_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
	"github.com/warrenmq/warren/raftq/testwait"
)

// answerLosingMember is a real member whose next loseGets gets are
// committed and applied but answered with ErrNotLeader, as a leader's are
// when it loses its leadership between proposing a get and applying it
// (paused, cut off): raft fails the proposal of an entry that the next
// leader commits all the same.
type answerLosingMember struct {
	*replica.Replica
	loseGets atomic.Int32
}

func (m *answerLosingMember) Get(noAck bool) (queue.Delivery, uint32, bool, error) {
	return m.lose(m.Replica.Get(noAck))
}

func (m *answerLosingMember) GetAs(getter uint64, noAck bool) (queue.Delivery, uint32, bool, error) {
	return m.lose(m.Replica.GetAs(getter, noAck))
}

func (m *answerLosingMember) lose(d queue.Delivery, remaining uint32, ok bool, err error) (queue.Delivery, uint32, bool, error) {
	if err == nil && m.loseGets.Add(-1) >= 0 {
		return queue.Delivery{}, 0, false, replica.ErrNotLeader
	}
	return d, remaining, ok, err
}

// A basic.get asked of the member on the channel's own node, committed
// but unanswered because the member lost its leadership meanwhile, is
// asked again; the message the first attempt took must come back to the
// queue at once and reach a later get, marked redelivered, rather than
// stay checked out to a getter no channel answers for until a new leader
// gives up on the old one's consumers.
func TestLocalGetWhoseAnswerIsLostReturnsTheMessage(t *testing.T) {
	c := cluster{"b": newNode(t, "b")}
	m := &answerLosingMember{Replica: c["b"].openReplica("q1")}
	r := c.router(t, "b", "q1", m, 0)
	var conf confirms
	publish(t, r, 0, 1, &conf)
	testwait.For(t, 10*time.Second, "confirm", func() bool { ok, _ := conf.counts(); return ok == 1 })

	m.loseGets.Store(1)
	d, _, ok, err := r.Get(false)
	if err != nil || !ok {
		// The attempt asked again found the queue empty: the message is
		// with the first attempt's getter, which the router releases.
		testwait.For(t, 5*time.Second, "the lost get's message back in the queue", func() bool {
			st := m.Stats()
			return st.Ready == 1 && st.Unacked == 0
		})
		d, _, ok, err = r.Get(false)
	}
	if err != nil || !ok || string(d.Message.Body) != "m0" || !d.Redelivered {
		t.Fatalf("get after the lost answer: %+v ok %v err %v", d, ok, err)
	}
	if st := m.Stats(); st.Ready != 0 || st.Unacked != 1 {
		t.Fatalf("stats while the channel holds it: %+v", st)
	}
	r.Settle([]uint64{d.ID})
	testwait.For(t, 10*time.Second, "the get settled", func() bool { return m.Stats() == queue.Stats{} })
}
