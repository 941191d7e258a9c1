package node_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/node/nodetest"
)

// TestStandaloneDataBecomesAClusterOfOne: a standalone node's data
// directory started as a cluster member used to form an empty cluster and
// delete the standalone queues' logs as unknown, every confirmed message
// with them. Started as a cluster of one under the name its queues know
// (as make run now starts it), the node carries everything over: queues
// with their messages, exchanges, bindings, users. Any other cluster start
// is refused, saying why, and loses nothing; once carried over, the
// directory is a member's, which a standalone start refuses.
func TestStandaloneDataBecomesAClusterOfOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	standalone := node.Config{
		DataDir: dir, AMQPAddr: "127.0.0.1:0",
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Broker: broker.Config{Seed: broker.DefaultSeed()},
	}
	n := startNode(t, standalone)
	ch := dialNode(t, n)
	if _, err := ch.QueueDeclare("kept", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("classic-kept", true, false, false, false, amqp091.Table{"x-queue-type": "classic"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("orders", "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("kept", "new", "orders", false, nil); err != nil {
		t.Fatal(err)
	}
	for i, ok := range confirms(t, ch, "kept", 5) {
		if !ok {
			t.Fatalf("publish %d nacked", i)
		}
	}
	for i, ok := range confirms(t, ch, "classic-kept", 3) {
		if !ok {
			t.Fatalf("publish %d to the classic queue nacked", i)
		}
	}
	closeNode(t, n)

	member := func(name string) node.Config {
		cfg := standalone
		cfg.Cluster = &node.ClusterConfig{NodeName: name, InternalAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0"}
		return cfg
	}
	if m, err := node.Start(member("warren-0")); err == nil {
		closeNode(t, m)
		t.Fatal("a cluster member named warren-0 started on a standalone node's data directory")
	} else if !strings.Contains(err.Error(), "standalone node's data") {
		t.Errorf("refused with %q", err)
	}
	n = startNode(t, standalone)
	wantMessages(t, n, "kept", 5)
	closeNode(t, n)

	n = startNode(t, member(broker.DefaultNodeID))
	waitReady(t, n)
	wantMessages(t, n, "kept", 5)
	wantMessages(t, n, "classic-kept", 3)
	ch = dialNode(t, n)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirm("orders", "new", true, false, amqp091.Publishing{Body: []byte("through the binding")})
	if err != nil || !dc.Wait() {
		t.Fatalf("publish through the carried exchange and binding: %v", err)
	}
	wantMessages(t, n, "kept", 6)
	if _, err := os.Stat(filepath.Join(dir, "metadata.db")); !os.IsNotExist(err) {
		t.Errorf("the standalone metadata is still in place: %v", err)
	}
	closeNode(t, n)

	n = startNode(t, member(broker.DefaultNodeID))
	waitReady(t, n)
	wantMessages(t, n, "kept", 6)
	closeNode(t, n)
	if s, err := node.Start(standalone); err == nil {
		closeNode(t, s)
		t.Fatal("a standalone node started on the cluster of one's data directory")
	} else if !strings.Contains(err.Error(), "cluster member's data") {
		t.Errorf("refused with %q", err)
	}
}

// TestMemberDataRefusedStandalone: a cluster member's data directory
// started standalone showed an empty broker; it is refused, and the member
// started again has its messages.
func TestMemberDataRefusedStandalone(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 1)
	if _, err := ms[0].Channel().QueueDeclare("kept", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	publishSome(t, ms[0], "kept", 3)
	ms[0].Stop()
	standalone := node.Config{
		DataDir: ms[0].DataDir(), AMQPAddr: "127.0.0.1:0",
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Broker: broker.Config{Seed: broker.DefaultSeed()},
	}
	if s, err := node.Start(standalone); err == nil {
		closeNode(t, s)
		t.Fatal("a standalone node started on a cluster member's data directory")
	} else if !strings.Contains(err.Error(), "cluster member's data") {
		t.Errorf("refused with %q", err)
	}
	ms[0].Start()
	if q, err := ms[0].Channel().QueueDeclarePassive("kept", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	} else if q.Messages != 3 {
		t.Errorf("the member holds %d messages after the refused start, want 3", q.Messages)
	}
}

// wantMessages checks that queue q holds n messages, as declare-ok counts
// them.
func wantMessages(t *testing.T, n *node.Node, q string, want int) {
	t.Helper()
	got, err := dialNode(t, n).QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Messages != want {
		t.Errorf("%s holds %d messages, want %d", q, got.Messages, want)
	}
}

func waitReady(t *testing.T, n *node.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Ready(ctx); err != nil {
		t.Fatal(err)
	}
}

func startNode(t *testing.T, cfg node.Config) *node.Node {
	t.Helper()
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func closeNode(t *testing.T, n *node.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Logf("close: %v", err)
	}
}
