package replica

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/raftq"
)

// TestDeadLetterOffTheFSM: dead letters are published off raft's FSM
// goroutine and without the replica's locks, in the order the machine
// dead-lettered them, and a target that blocks holds up neither the queue
// nor its publishers.
func TestDeadLetterOffTheFSM(t *testing.T) {
	release := make(chan struct{})
	got := make(chan string, 10)
	var r *Replica
	r, err := Open(Config{
		Name:      "test/dl",
		Dir:       t.TempDir(),
		NodeID:    "n1",
		Arguments: amqp.Table{"x-dead-letter-exchange": "", "x-max-length": int64(1)},
		Created:   1,
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		DeadLetter: func(ctx context.Context, m *queue.Message, reason raftq.Reason, at int64, done func(error)) {
			<-release // a target with no room
			r.Stats() // takes fsm.mu: deadlocks if called under it
			got <- string(m.Body) + " " + reason.String()
			done(nil)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	enqueue(t, r, 4) // confirmed although the dead letters are stuck
	if st := r.Stats(); st.Ready != 1 {
		t.Fatalf("%d ready, want 1", st.Ready)
	}
	close(release)
	for _, want := range []string{"m0 maxlen", "m1 maxlen", "m2 maxlen"} {
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("dead letter %q, want %q", g, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no dead letter %q", want)
		}
	}
}
