package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestForceCheckpointAgainstRealCluster runs force checkpoint against three
// real nodes: each member of the selected queue reports a snapshot, quorum
// status shows it, the patterns select, and with a member's node stopped
// the command names it and exits 1 (--errors-only lists only it).
func TestForceCheckpointAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	for _, q := range []string{"orders", "audit"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		if err := ch.Publish("", "orders", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	ctl := ctlAt(t, ms[1].InternalAddr().String())
	testwait.For(t, 5*time.Second, "the asked node to know both queues", func() bool {
		_, a := ms[1].Broker().QueueRecord("/", "orders")
		_, b := ms[1].Broker().QueueRecord("/", "audit")
		return a && b
	})

	out := ctl("force", "checkpoint", "--queue-pattern", "^ord")
	if got := strings.Count(columns(out), "| ok"); strings.Contains(out, "audit") || got != 3 {
		t.Fatalf("force checkpoint of orders: %d ok rows:\n%s", got, out)
	}
	var rep checkpointReport
	if err := json.Unmarshal([]byte(ctl("--json", "force", "checkpoint", "--queue-pattern", "^orders$")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Queues) != 1 || len(rep.Queues[0].Members) != 3 {
		t.Fatalf("--json: %+v", rep)
	}
	snaps := map[string]uint64{}
	for _, m := range rep.Queues[0].Members {
		if m.SnapshotIndex == nil || *m.SnapshotIndex == 0 || m.Error != "" {
			t.Fatalf("--json: member %+v", m)
		}
		snaps[m.Node] = *m.SnapshotIndex
	}
	status := ctl("quorum", "status", "orders")
	if !strings.Contains(status, "SNAPSHOT") {
		t.Fatalf("quorum status shows no snapshot column:\n%s", status)
	}
	for node, idx := range snaps {
		if !strings.Contains(columns(status), node+" | ") || !strings.Contains(columns(status), " | "+u64(idx)+" | ") {
			t.Fatalf("quorum status does not show %s's snapshot at %d:\n%s", node, idx, status)
		}
	}
	if out := ctl("force", "checkpoint", "--vhost-pattern", "^nothing$"); out != "No quorum queue matches.\n" {
		t.Fatalf("no match: %q", out)
	}
	if out := ctl("force", "checkpoint", "--errors-only"); out != "Every member took its checkpoint.\n" {
		t.Fatalf("--errors-only with none: %q", out)
	}

	stopped := ms[2].Name()
	ms[2].Stop()
	code, out, errOut := warrenctl(t, "--node", ms[1].InternalAddr().String(), "force", "checkpoint", "--errors-only")
	if code != 1 || strings.Count(out, "error: node "+stopped+" is not alive") != 2 || strings.Count(out, "error:") != 2 {
		t.Fatalf("with %s stopped: exit %d:\n%s%s", stopped, code, out, errOut)
	}
	if code, _, errOut := warrenctl(t, "--node", ms[1].InternalAddr().String(), "force", "checkpoint", "--queue-pattern", "("); code != 1 ||
		!strings.Contains(errOut, "--queue-pattern") {
		t.Fatalf("a bad pattern: exit %d: %s", code, errOut)
	}
}
