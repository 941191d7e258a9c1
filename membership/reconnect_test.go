package membership

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq/testwait"
)

// TestMemberSeenDeadIsJoinedAgain: a member this node declared dead, and
// stopped gossiping to, that is up again at its address without reaching
// out (as after a partition both sides waited out) is seen alive again,
// and sees this node: without the reconnect neither would ever hear of
// the other.
func TestMemberSeenDeadIsJoinedAgain(t *testing.T) {
	a := startNode(t, "a", nil)
	b := startNode(t, "b", nil)
	if _, err := b.Join([]string{a.LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, a, Joined, "b")
	addr := b.LocalAddr()
	b.Stop()
	waitEvent(t, a, Failed, "b")
	// Let a's gossip of b's death run out, so that nothing but the
	// reconnect would reach the new b.
	time.Sleep(2 * time.Second)

	b2, err := Start(Config{
		Meta:          Meta{Name: "b", AMQP: "127.0.0.1:5672", Internal: "127.0.0.1:25672", Version: "test"},
		BindAddr:      addr,
		ProbeInterval: 100 * time.Millisecond,
		ProbeTimeout:  50 * time.Millisecond,
		Log:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Stop() })
	waitEvent(t, a, Joined, "b")
	testwait.ForNil(t, 10*time.Second, "b to see a alive", func() error {
		if alive := fmt.Sprint(names(b2.Members(), Alive)); alive != "[a b]" {
			return fmt.Errorf("b sees %s", alive)
		}
		return nil
	})
}
