package node_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/node/nodetest"
)

// TestDataDirOfTheOtherKind: a standalone node's data directory started
// as a cluster member used to form an empty cluster and delete the
// standalone queues' logs as unknown, every confirmed message with them.
// Each kind of node now refuses the other's directory, saying why, and
// the data stays: the standalone node started again has its messages.
func TestDataDirOfTheOtherKind(t *testing.T) {
	dir := t.TempDir()
	cfg := node.Config{
		DataDir: dir, AMQPAddr: "127.0.0.1:0",
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Broker: broker.Config{Seed: broker.DefaultSeed()},
	}
	n := startNode(t, cfg)
	ch := dialNode(t, n)
	if _, err := ch.QueueDeclare("kept", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	for i, ok := range confirms(t, ch, "kept", 5) {
		if !ok {
			t.Fatalf("publish %d nacked", i)
		}
	}
	closeNode(t, n)

	member := cfg
	member.Cluster = &node.ClusterConfig{NodeName: "warren-0", InternalAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0"}
	if m, err := node.Start(member); err == nil {
		closeNode(t, m)
		t.Fatal("a cluster member started on a standalone node's data directory")
	} else if !strings.Contains(err.Error(), "standalone node's data") {
		t.Errorf("refused with %q", err)
	}

	n = startNode(t, cfg)
	q, err := dialNode(t, n).QueueDeclarePassive("kept", true, false, false, false, quorum)
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages != 5 {
		t.Errorf("the standalone node holds %d messages after the refused start, want 5", q.Messages)
	}
	closeNode(t, n)

	// And the other way: a member's directory started standalone.
	ms := nodetest.StartCluster(t, 1)
	if _, err := ms[0].Channel().QueueDeclare("kept", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	publishSome(t, ms[0], "kept", 3)
	ms[0].Stop()
	standalone := cfg
	standalone.DataDir = ms[0].DataDir()
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
